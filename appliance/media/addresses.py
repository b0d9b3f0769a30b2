"""Which IP addresses an image fetch may connect to.

Only globally routable unicast addresses, unless the operator allows a network explicitly
(`--allowed-media-networks`). IPv6 forms that embed an IPv4 address (IPv4-mapped `::ffff:a.b.c.d`,
IPv4-compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`, Teredo) are judged by the IPv4
address inside them too, so `::ffff:127.0.0.1` cannot stand in for loopback.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

__all__ = ["IPAddress", "IPNetwork", "parse_address", "refusal_reason"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def parse_address(text: str) -> IPAddress | None:
    """The address `text` spells (IPv6 with or without brackets, no zone), or None."""
    try:
        return ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if any(address in network for network in _NAT64) or (
        address in _IPV4_COMPATIBLE and not (address.is_loopback or address.is_unspecified)
    ):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _category(address: IPAddress) -> str | None:
    """Why `address` is not a public unicast address (None: it is one)."""
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return "carrier-grade NAT (shared)"
    if isinstance(address, ipaddress.IPv4Address) and address.is_reserved:
        return "reserved"
    if address.is_private:
        return "private"
    if address.is_reserved or not address.is_global:
        return "reserved"
    return None


def refusal_reason(address: IPAddress, allowed_networks: Iterable[IPNetwork] = ()) -> str | None:
    """Why a fetch may not connect to `address`, e.g. "a loopback address"; None if it may.

    An address inside one of `allowed_networks` is always allowed (the operator's explicit choice).
    """
    if any(address.version == network.version and address in network for network in allowed_networks):
        return None
    if isinstance(address, ipaddress.IPv6Address):
        inner = _embedded_ipv4(address)
        inner_category = _category(inner) if inner is not None else None
        if inner_category is not None:
            return f"an IPv6 address embedding {inner} (a {inner_category} address)"
    category = _category(address)
    return f"a {category} address" if category is not None else None
