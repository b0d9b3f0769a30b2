"""Anthropic's Messages API (`/v1/messages`) as a translation onto the chat core."""
