"""Turns validated API requests into engine requests and engine events into API responses."""
