#!/usr/bin/env python
"""garag's command line; the same as the ``garag`` console script.

Examples:
    python run_pipeline.py index --dataset fever
    python run_pipeline.py retrieve "The Beatles were formed in England." -k 5
    python run_pipeline.py evaluate-retrieval --dataset hover
"""

import sys

from app.cli import main

if __name__ == "__main__":
    sys.exit(main())
