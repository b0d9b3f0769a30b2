"""Wire types: msgspec structs for each API family the appliance speaks (no logic)."""
