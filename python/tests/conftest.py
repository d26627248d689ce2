"""pytest setup for the mtac Python package's tests: the independent PyTorch reference
(tests/ref/mta_ref.py and its case generators) is imported from the repository."""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, 'tests', 'ref'))
