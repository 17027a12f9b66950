"""What docvec hands to the outside world and reads from it, as pydantic models: the stored page payload,
the ingest report, search hits and filters, document summaries, embedding records. Also the rules their
fields follow (document ids, tags, ``k``), each defined once (``_rules``).

JSON Schemas of these models are exported under ``schemas/`` (``make schemas``). The package's names are
its modules' (each module's ``__all__`` says which).
"""

from . import _documents, _pages, _rules, _search, _versions
from ._documents import *  # noqa: F403
from ._pages import *  # noqa: F403
from ._rules import *  # noqa: F403
from ._search import *  # noqa: F403
from ._versions import *  # noqa: F403

__all__ = [*_documents.__all__, *_pages.__all__, *_rules.__all__, *_search.__all__, *_versions.__all__]
