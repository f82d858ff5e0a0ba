"""The application layer: the command line (and later the service) on top of every stage.

Imports flow one way: ``app -> eval -> pipeline -> {retrievers, verifier}
-> garag core``.  Nothing below imports this package (tests/test_layers.py).
"""
