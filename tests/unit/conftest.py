"""Make the checkout importable as ansible_collections.gpufleet.tuning for the unit tests.

.collections/ansible_collections/gpufleet/tuning is a committed link back to the repository
root; ansible_collections is a namespace package, so this path merges with any collections
installed in the test venv.
"""

import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(REPO_ROOT, ".collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
