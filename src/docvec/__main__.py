"""``python -m docvec``: the ``docvec`` command."""

from ._cli import app

app(prog_name="docvec")
