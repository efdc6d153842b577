"""The studies behind docs/results that are not a config: each runs as
``python -m experiments.studies.NAME`` and writes its record there."""
