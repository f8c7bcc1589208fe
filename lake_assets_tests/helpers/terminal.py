"""Start a command as it starts from a shell prompt, where Ctrl-C reaches it.

A process started with SIGINT ignored keeps it ignored, and Python then installs no
KeyboardInterrupt handler: a non-interactive shell ignores SIGINT for the commands it puts
in the background (`nohup ... &` in a CI script), and the suite's own process inherits that.
A test that sends SIGINT as a user's Ctrl-C starts its command with `preexec_fn=ctrl_c_reaches_it`.
"""

import signal


def ctrl_c_reaches_it() -> None:
    """In the child, before exec: SIGINT back to its default, whatever the suite inherited."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
