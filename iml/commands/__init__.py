"""The commands of ``iml`` (:mod:`iml.cli`): its argument parser (:mod:`.parser`), the configs
that ``iml reproduce`` and ``iml sweep`` read and the named options that set their keys
(:mod:`.config`), and one module per command, each checking its input and returning the work
(:mod:`.reproduce`, :mod:`.figures`, :mod:`.sweep`, :mod:`.reveal`).
"""
