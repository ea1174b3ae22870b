# The TRL-style scripts are programs run by test_scripts.py, not modules to import (--doctest-modules would).
collect_ignore = ["scripts"]
