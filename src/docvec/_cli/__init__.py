"""The ``docvec`` command line: thin over :class:`docvec.Index` and the model tools.

Each command loads only what it needs (``--help`` and ``--version`` load no model and no store).
"""

from . import _agent_commands, _index_commands, _model_commands, _version_commands  # noqa: F401  (they register themselves)
from ._common import app

__all__ = ["app", "main"]


def main() -> None:  # pragma: no cover
    """Run the ``docvec`` command."""
    app()
