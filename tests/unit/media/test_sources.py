"""Classifying image URLs and the checks that run before any I/O; policy and address rules."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from appliance.errors import ConfigError, InvalidRequest
from appliance.media.addresses import parse_address, refusal_reason
from appliance.media.policy import MediaPolicy, build_policy
from appliance.media.sources import DataImage, LocalImage, RemoteImage, parse_source


@pytest.fixture
def media_root(tmp_path: Path) -> Path:
    root = tmp_path / "allowed"
    root.mkdir()
    return root


@pytest.fixture
def policy(media_root: Path) -> MediaPolicy:
    return build_policy(
        allowed_domains=["images.example.com", "*.cdn.example", "127.0.0.1"],
        allowed_local_media_path=str(media_root),
        max_image_bytes=3000,
    )


def refused(url: str, policy: MediaPolicy, code: str = "invalid_image_url") -> str:
    with pytest.raises(InvalidRequest) as info:
        parse_source(url, policy)
    assert info.value.status == 400
    assert info.value.code == code
    return info.value.message


# -- data URLs ----------------------------------------------------------------------------------


def test_data_url(policy: MediaPolicy) -> None:
    assert parse_source("data:image/png;base64,AAAA", policy) == DataImage(media_type="image/png", payload="AAAA")
    assert parse_source("DATA:Image/JPEG;BASE64,AAAA", policy) == DataImage(media_type="image/jpeg", payload="AAAA")


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("data:text/plain;base64,AAAA", "invalid_image_format"),
        ("data:image/svg+xml;base64,AAAA", "invalid_image_format"),
        ("data:;base64,AAAA", "invalid_image_format"),
        ("data:image/png,rawbytes", "invalid_image_url"),
        ("data:image/png;base64", "invalid_image_url"),
    ],
)
def test_bad_data_urls(url: str, code: str, policy: MediaPolicy) -> None:
    refused(url, policy, code)


def test_oversized_data_url_is_refused_before_decoding(policy: MediaPolicy) -> None:
    assert parse_source("data:image/png;base64," + "A" * 4000, policy)
    message = refused("data:image/png;base64," + "A" * 5000, policy, code="image_too_large")
    assert "3000 bytes" in message


# -- http(s) URLs -------------------------------------------------------------------------------


def test_urls_are_off_by_default() -> None:
    assert "allowed-media-domains" in refused("https://images.example.com/a.png", MediaPolicy())


def test_allowed_hosts(policy: MediaPolicy) -> None:
    for url in (
        "https://images.example.com/a.png",
        "http://IMAGES.example.com./a.png",
        "https://a.cdn.example/x.jpg",
        "https://a.b.cdn.example/x.jpg",
    ):
        assert isinstance(parse_source(url, policy), RemoteImage), url


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example.com/a.png",
        "https://cdn.example/a.png",  # *.cdn.example is for subdomains only
        "https://images.example.com.evil.net/a.png",
        "https://evilimages.example.com/a.png",
        "http://localhost/a.png",
    ],
)
def test_hosts_outside_the_list_are_refused(url: str, policy: MediaPolicy) -> None:
    assert "allowed media domains" in refused(url, policy)


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("https://user:secret@images.example.com/a.png", "credentials"),
        ("https://user@images.example.com/a.png", "credentials"),
        ("ftp://images.example.com/a.png", "scheme 'ftp:'"),
        ("gopher://images.example.com/", "scheme 'gopher:'"),
        ("javascript:alert(1)", "scheme 'javascript:'"),
        ("images.example.com/a.png", "absolute"),
        ("relative/a.png", "absolute"),
    ],
)
def test_bad_url_forms(url: str, fragment: str, policy: MediaPolicy) -> None:
    assert fragment in refused(url, policy)


def test_ip_literals_are_checked_before_any_connection() -> None:
    policy = build_policy(allowed_domains=["*"])
    for url in (
        "http://127.0.0.1/a.png",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.1.2.3/a.png",
        "http://100.64.0.1/a.png",
        "http://[::1]/a.png",
        "http://[::ffff:127.0.0.1]/a.png",
        "http://[fe80::1]/a.png",
        "http://224.0.0.1/a.png",
        "http://0.0.0.0/a.png",
    ):
        assert "not allowed" in refused(url, policy), url
    # Explicitly allowed networks may be reached.
    loopback = build_policy(allowed_domains=["*"], allowed_networks=["127.0.0.0/8"])
    assert isinstance(parse_source("http://127.0.0.1:8000/a.png", loopback), RemoteImage)


# -- local paths --------------------------------------------------------------------------------


def test_local_paths(policy: MediaPolicy, media_root: Path) -> None:
    assert parse_source(f"{media_root}/a.png", policy) == LocalImage(path=media_root / "a.png")
    assert parse_source(f"{media_root}//sub/./a.png", policy) == LocalImage(path=media_root / "sub" / "a.png")
    assert parse_source(f"file://{media_root}/a.png", policy) == LocalImage(path=media_root / "a.png")
    assert parse_source(f"file://localhost{media_root}/a%20b.png", policy) == LocalImage(path=media_root / "a b.png")


def test_local_paths_are_off_by_default(media_root: Path) -> None:
    assert "allowed-local-media-path" in refused(f"{media_root}/a.png", MediaPolicy())


@pytest.mark.parametrize(
    ("template", "fragment"),
    [
        ("{root}/../secret.png", "'..'"),
        ("{root}/sub/../../secret.png", "'..'"),
        ("file://{root}/%2e%2e/secret.png", "'..'"),
        ("file://{root}/%2E%2E/secret.png", "'..'"),
        ("{root}-evil/a.png", "not inside"),
        ("/etc/passwd", "not inside"),
        ("{root}/a.png\x00.txt", "NUL"),
        ("file://{root}/a.png%00", "NUL"),
        ("file://otherhost{root}/a.png", "host"),
        ("file:{root}/a.png", "file:///"),
        ("file://{root}/a.png?x=1", "query"),
        ("file://{root}/%ff.png", "UTF-8"),
    ],
)
def test_local_path_refusals(template: str, fragment: str, policy: MediaPolicy, media_root: Path) -> None:
    assert fragment in refused(template.format(root=media_root), policy)


def test_percent_escapes_in_plain_paths_are_literal(policy: MediaPolicy, media_root: Path) -> None:
    # A plain path is not a URL: "%2e%2e" names a directory called that, inside the root.
    source = parse_source(f"{media_root}/%2e%2e/x.png", policy)
    assert source == LocalImage(path=media_root / "%2e%2e" / "x.png")


# -- policy and addresses -----------------------------------------------------------------------


def test_policy_validation(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="allowed_media_domains"):
        build_policy(allowed_domains=["https://example.com"])
    with pytest.raises(ConfigError, match="allowed_media_domains"):
        build_policy(allowed_domains=["example.com:8080"])
    with pytest.raises(ConfigError, match="allowed_media_networks"):
        build_policy(allowed_networks=["10.0.0.0/33"])
    with pytest.raises(ConfigError, match="absolute"):
        build_policy(allowed_local_media_path="relative/dir")
    with pytest.raises(ConfigError, match="not a directory"):
        build_policy(allowed_local_media_path=str(tmp_path / "missing"))
    policy = build_policy(allowed_domains=["Bücher.Example", " *.Example.org ", "[::1]"])
    assert policy.allowed_domains == ("xn--bcher-kva.example", "*.example.org", "::1")


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("93.184.216.34", None),
        ("2606:4700::1", None),
        ("127.0.0.1", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("255.255.255.255", "reserved"),
        ("240.0.0.1", "reserved"),
        ("::1", "loopback"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "embedding 127.0.0.1"),
        ("::ffff:10.0.0.1", "embedding 10.0.0.1"),
        ("64:ff9b::a9fe:a9fe", "embedding 169.254.169.254"),
        ("2002:7f00:1::", "embedding 127.0.0.1"),
        ("::127.0.0.1", "embedding 127.0.0.1"),
    ],
)
def test_address_rules(address: str, expected: str | None) -> None:
    reason = refusal_reason(parse_address(address))
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and expected in reason


def test_allowed_networks_override() -> None:
    networks = [ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("::1/128")]
    assert refusal_reason(parse_address("10.9.9.9"), networks) is None
    assert refusal_reason(parse_address("::1"), networks) is None
    assert refusal_reason(parse_address("127.0.0.1"), networks) is not None
