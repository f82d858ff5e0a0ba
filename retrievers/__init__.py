"""Sentence retrievers behind one small interface (see ``retrievers.base``)."""
