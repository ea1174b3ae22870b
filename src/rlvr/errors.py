"""The one exception type for mistakes a user can fix (bad config, missing file, malformed row).

The CLI prints these as a single line, without a traceback; everything else is a bug and
keeps its traceback.
"""


class UserError(Exception):
    """A problem with the user's input; the message names the cause and the fix."""
