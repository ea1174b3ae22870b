"""Seeing a run: `rlvr report RUN_DIR` (one self-contained HTML file). Everything read from a run
directory is untrusted text: it is escaped, never executed."""
