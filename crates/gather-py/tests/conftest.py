import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# hypothesis keeps caches in ./.hypothesis by default: keep them out of the checkout.
try:
    from hypothesis import configuration

    configuration.set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), "gather-py-hypothesis"))
except ImportError:  # the property tests need hypothesis
    pass
