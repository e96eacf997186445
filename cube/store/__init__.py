"""The store wing: layout, writing, reading, locks, the recorder, validation and summaries."""
