"""The pipeline stages between the front door (:class:`docvec.Index`) and the parts below it (the model
runtime, the renderer, the store): which files a run reads (:mod:`._sources`), ingesting them
(:mod:`._ingest`), searching (:mod:`._search`), listing and deleting documents (:mod:`._documents`),
versions of a collection and what made them (:mod:`._versions`, :mod:`._provenance`), what fits a version
(:mod:`._fit`: the model and settings it is served and rebuilt with), rebuilding one (:mod:`._reindex`) and
collecting the page store (:mod:`._gc`)."""
