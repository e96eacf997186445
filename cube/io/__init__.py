"""The io wing: other tools' results into a cube (importers) and the synthetic demo cube."""
