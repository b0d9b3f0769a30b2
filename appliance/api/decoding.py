"""Moved to `appliance.entry.decoding` (a batch line's body is decoded as its route's is, without
HTTP); this name stays for the branches that still import it."""

from appliance.entry.decoding import convert_body, convert_form, decode_body, decode_json

__all__ = ["convert_body", "convert_form", "decode_body", "decode_json"]
