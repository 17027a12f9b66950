"""Prefect without its telemetry, set before Prefect is imported: a flow run without a server starts a
temporary one, whose telemetry service tries the network (docvec's machines often have none) and writes to
the temporary database while the run does (``database is locked``). What the environment already says
wins: an operator who wants telemetry sets these variables."""

import os

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
