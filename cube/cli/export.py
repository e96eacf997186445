"""`saferl export PATH OUT.nc`: the cube as a netCDF file."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="export a cube to a netCDF file")
    p.add_argument("path", help="Zarr store directory")
    p.add_argument("out", help="netCDF file to write (.nc)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cube.store.read import export_netcdf

    out = export_netcdf(args.path, args.out)
    print(f"wrote {out}")
    return 0
