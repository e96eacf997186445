"""The store wing: one Zarr store per cube, every reader and writer of it.

``layout`` (create, extend and grow a store; open its group), ``grid`` (the published grid every reader
sees), ``writer`` and ``recorder`` (writing episodes, per-iterate variables and manifests; any trainer's
recorder), ``read`` (``open_cube``, the consistent load, manifests, netCDF export), ``damage`` (the one
``DamagedStoreError`` of every read of chunks), ``locks`` (write brackets, the seqlock, the one
consistent re-read of runs), ``claims`` (who trains a run), ``runstatus`` (every run's status for
``saferl status`` and the TUI), ``validate`` (value checks), ``summary`` (the human summary, run rows),
``mounts`` (whether file locks hold across nodes), ``fs`` (staged stores, side folders).
"""
