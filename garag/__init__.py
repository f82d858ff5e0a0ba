"""garag: graph-augmented retrieval-augmented generation for fact verification.

The ``garag`` package holds the core types, the FEVER readers, the sentence
store, configuration, artifact caching and the command line.  The stages live
in the sibling packages ``retrievers``, ``verifier``, ``pipeline`` and ``eval``.
"""

__version__ = "0.1.0"
