import sys
from pathlib import Path

# tests/samples.py is shared by the test modules and the fixture generator.
sys.path.insert(0, str(Path(__file__).parent))
