"""Page text: the terms keyword search indexes and queries (:mod:`._terms`) and the snippet a hit shows
(:mod:`._snippet`)."""
