"""The render wing: tables as text and the paper's figures (drawing only; statistics come from cube.stats)."""
