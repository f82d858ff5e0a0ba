"""Evaluation: the official FEVER score, label metrics and retrieval metrics.

Pure functions over ``garag.types`` objects (and, for parity with the official
FEVER scorer, its raw dicts); nothing here does I/O.  Import from the modules
(``eval.fever_score``, ``eval.retrieval_metrics``): the package does not
re-export, because the function ``fever_score`` would shadow its module.
"""
