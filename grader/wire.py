"""The parent's end of the pipe to a worker (the format itself is in grader/child/wire.py)."""

from .child.wire import *  # noqa: F401,F403
from .child.wire import MalformedMessage, loads, timing_parent  # noqa: F401
