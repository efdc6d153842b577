"""iml: loss-corrected confidence scores for class-weighted classifiers.

Implements Caplin, Martin & Marx, *Calibrating for Class Weights by Modeling Machine Learning*.
"""

__version__ = "0.1.0"
