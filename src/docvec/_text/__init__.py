"""Page text: the terms keyword search indexes and queries (:mod:`._terms`), the snippet a hit shows
(:mod:`._snippet`), and reading the text of pages that have no text layer (:mod:`._ocr`)."""
