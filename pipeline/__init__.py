"""Pipelines compose retrievers and verifiers; they hold no algorithms of their own."""
