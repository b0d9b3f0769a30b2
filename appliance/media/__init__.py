"""Images for vision requests (where they may come from, reading them safely, decoding them) and
uploaded audio for speech requests, and speech answers encoded.

    sources    what an `image_url` points at (data URL, http(s) URL, local path) and the checks
               that need no I/O; run for every image before any work is spent on a request
    policy     `MediaPolicy`: the server's media settings, validated at start-up
    addresses  which IP addresses a download may connect to
    fetch      http(s) downloads with SSRF protection (resolve, check every address, connect to
               the checked one; redirects re-checked hop by hop; deadline and byte cap)
    local      reading a file inside the allowed directory (symlinks resolved, by components)
    decode     bytes -> RGB uint8 pixels: pixel limit from the header, first frame, EXIF rotation,
               scaled down to the size the model uses
    loader     `ImageLoader`: all of the above for the service layer
    audio      uploaded audio bytes -> 16 kHz mono float32 (PyAV), within duration, channel and
               sample-rate limits; `AudioDecoder` runs it in threads, a few files at a time.
               Imported by its users, not here (`import av` costs 0.1 s)
    audio_encode  mono float32 samples -> a wav, pcm, mp3, opus, aac or flac file (the answer
               of /v1/audio/speech); imported by its users too

No web framework and no OpenVINO here. Refusals are `appliance.errors.InvalidRequest` (400) with a
code: `invalid_image_url`, `image_fetch_failed`, `image_too_large`, `invalid_image_format`,
`invalid_image`; for audio (param `file`): `invalid_audio`, `truncated_audio`, `empty_audio`,
`audio_too_long`, `unsupported_audio`.
"""

from appliance.media.decode import DecodedImage, Detail, Fit
from appliance.media.loader import ImageLoader
from appliance.media.policy import MediaPolicy, build_policy
from appliance.media.sources import DataImage, ImageSource, LocalImage, RemoteImage

__all__ = [
    "DataImage",
    "DecodedImage",
    "Detail",
    "Fit",
    "ImageLoader",
    "ImageSource",
    "LocalImage",
    "MediaPolicy",
    "RemoteImage",
    "build_policy",
]
