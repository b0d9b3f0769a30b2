"""The channel between the server process and an engine process: msgspec-encoded messages.

Parent -> engine: `Submit`, `Cancel`, `Tokenize`, `Detokenize`, `Embed`, `Rerank`, `Transcribe`,
`DetectVoice`, `Synthesize`, `Shutdown`. Engine -> parent: `Ready` or `LoadFailed` once, then
`Batch`es of per-request events (`Accepted`, `Rejected`, `Delta`, `Finished`, `Tokenized`,
`Detokenized`, `Embedded`, `Reranked`, `Transcribed`, `VoiceDetected`, `SpeechAudio`, `Synthesized`) and engine `Stats`. Which
commands and answers belong to which task, and which engine serves it, is declared once, in `TASKS`. Each message is one `send_bytes` frame, except a Submit with
images, whose pixels follow in raw frames, and a Transcribe, whose samples follow in one
(`encode_to_engine` / `ToEngineDecoder`). A request returning several sequences (n > 1, beam search) gets `Delta`s and
one `Finished` per sequence, told apart by `index`.
"""

from __future__ import annotations

from typing import Any, Literal, Union

import msgspec

__all__ = [
    "Accepted",
    "Batch",
    "ANSWERS",
    "COMMANDS",
    "Cancel",
    "ChatPrompt",
    "Command",
    "Delta",
    "DetectVoice",
    "Detokenize",
    "Detokenized",
    "Embed",
    "Embedded",
    "EngineEvent",
    "Finished",
    "ImageData",
    "LoadFailed",
    "PROGRESS",
    "Ready",
    "Rejected",
    "Rerank",
    "Reranked",
    "SamplingParams",
    "Shutdown",
    "SpeechAudio",
    "Stats",
    "TASKS",
    "TaskFrames",
    "Submit",
    "TextPrompt",
    "TokenLogprob",
    "TokenPrompt",
    "Tokenize",
    "TaggedGrammar",
    "TriggeredGrammar",
    "Tokenized",
    "Synthesize",
    "Synthesized",
    "Transcribe",
    "TranscribeOptions",
    "Transcribed",
    "VoiceDetected",
    "decode_from_engine",
    "ToEngineDecoder",
    "decode_to_engine",
    "encode_to_engine",
    "encoder",
    "merge_deltas",
]


class TaggedGrammar(msgspec.Struct, frozen=True):
    """One tag of a `TriggeredGrammar`: `begin` (which starts with one of its triggers), then
    text matching `grammar`, then `end` (empty: nothing)."""

    begin: str
    grammar: str
    """An EBNF grammar with a `root` rule (written by `appliance.grammar`)."""
    end: str = ""


class TriggeredGrammar(msgspec.Struct, frozen=True):
    """Free text until the model writes one of `triggers`, then a tag whose `begin` starts with
    it, held to the tag's grammar; then free text again (OpenVINO GenAI's structural tags,
    `StructuredOutputConfig.TriggeredTags`). Tool calls in auto mode: the text is the model's,
    each call (from its marker) matches the tools' schemas."""

    triggers: tuple[str, ...]
    tags: tuple[TaggedGrammar, ...]
    at_least_one: bool = False
    """The output starts with a tag."""
    stop_after_first: bool = False
    """The output ends after the first tag."""


class SamplingParams(msgspec.Struct, frozen=True, kw_only=True):
    """What the engine needs to build a GenerationConfig (validated by the service layer)."""

    max_new_tokens: int | None
    """None: as many as the context allows, up to max_tokens_limit."""
    min_new_tokens: int = 0
    temperature: float = 1.0
    """0: greedy decoding."""
    top_p: float = 1.0
    top_k: int = 0
    """0: all tokens."""
    min_p: float = 0.0
    seed: int | None = None
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    include_stop_str_in_output: bool = False
    ignore_eos: bool = False
    n: int = 1
    """Sequences returned (each a choice)."""
    best_of: int = 1
    """Above 1: beam search with this many beams, the best `n` returned."""
    length_penalty: float = 1.0
    logprobs: bool = False
    """Report each chosen token's log probability (the engine knows no alternatives)."""
    echo: bool = False
    """Send the prompt's text back in `Accepted.prompt_text` (completions `echo`)."""
    skip_special_tokens: bool = True
    grammar: str | None = None
    """An EBNF grammar (written by `appliance.grammar`) the output must match."""
    triggered: TriggeredGrammar | None = None
    """Tagged parts of free text held to grammars (never together with `grammar`)."""
    num_assistant_tokens: int = 0
    """Speculative decoding / prompt lookup: candidates per step (0: unset)."""
    assistant_confidence_threshold: float = 0.0
    """Speculative decoding: draft while this confident (0: unset)."""
    max_ngram_size: int = 0
    """Prompt lookup: longest n-gram matched (0: unset)."""


class ImageData(msgspec.Struct, frozen=True):
    """A decoded image: RGB, 8 bits per channel, rows top to bottom (`height * width * 3` bytes).

    On the pipe `pixels` is empty in the Submit and travels in a raw frame of its own (see
    `encode_to_engine`); the engine gets a view of that frame, not a copy.
    """

    width: int
    height: int
    pixels: memoryview


class ChatPrompt(msgspec.Struct, frozen=True, tag="chat"):
    """Messages rendered with the model's chat template inside the engine."""

    messages: list[dict[str, Any]]
    images: list[ImageData] = []
    """Vision graphs: the images, in the order of the `<ov_genai_image_N>` tags in `messages`."""
    tools: list[dict[str, Any]] | None = None
    """Tool definitions for the template's `tools` variable."""
    template_kwargs: dict[str, Any] = {}
    """Extra variables for the chat template (`chat_template_kwargs`)."""
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    """Render the last (assistant) message open, so generation continues it."""


class TextPrompt(msgspec.Struct, frozen=True, tag="text"):
    """A raw prompt (completions API), tokenized as is."""

    text: str


class TokenPrompt(msgspec.Struct, frozen=True, tag="tokens"):
    """A prompt given as token ids (completions API); the engine checks them against its vocabulary."""

    ids: list[int]


class Submit(msgspec.Struct, frozen=True, tag="submit"):
    request_id: int
    prompt: ChatPrompt | TextPrompt | TokenPrompt
    params: SamplingParams


class Cancel(msgspec.Struct, frozen=True, tag="cancel"):
    request_id: int


class Shutdown(msgspec.Struct, frozen=True, tag="shutdown"):
    pass


class Tokenize(msgspec.Struct, frozen=True, tag="tokenize"):
    """Tokenize a prompt (chat prompts are rendered with the template first); nothing generates."""

    request_id: int
    prompt: ChatPrompt | TextPrompt
    add_special_tokens: bool = False


class Detokenize(msgspec.Struct, frozen=True, tag="detokenize"):
    request_id: int
    tokens: list[int]


class Embed(msgspec.Struct, frozen=True, tag="embed"):
    """Embed texts (embedding graphs); token-id inputs are decoded to text by the engine."""

    request_id: int
    texts: list[str | list[int]]
    query: bool = False
    """Put the model's query instruction before each text (else its document instruction)."""


class Rerank(msgspec.Struct, frozen=True, tag="rerank"):
    """Score each document's relevance to the query (rerank graphs)."""

    request_id: int
    query: str
    documents: list[str]


class TranscribeOptions(msgspec.Struct, frozen=True, kw_only=True):
    """What a transcription asks of Whisper (validated by the service layer)."""

    task: Literal["transcribe", "translate"] = "transcribe"
    language: str | None = None
    """An ISO 639-1 code the model knows (None: the model detects it, or English-only)."""
    prompt: str = ""
    """Text the model reads as what came before the audio (OpenAI's `prompt`: spellings, style)."""
    temperature: float = 0.0
    """0: greedy decoding; above: sampling at this temperature."""
    segments: bool = False
    """Return the text's segments with their times."""
    words: bool = False
    """Return each word with its time (the graph's `speech.word_timestamps`)."""
    stream: bool = False
    """Send the text as it is decoded, in `Delta`s, before `Transcribed`."""


class Transcribe(msgspec.Struct, frozen=True, tag="transcribe"):
    """Transcribe (or translate) audio (speech-to-text graphs). Its samples, 16 kHz mono float32,
    travel in the raw frame that follows (`samples` is then empty)."""

    request_id: int
    options: TranscribeOptions
    samples: bytes = b""


class DetectVoice(msgspec.Struct, frozen=True, tag="detect_voice"):
    """The speech probability of each 32 ms frame of a live stream's next samples (speech-to-text
    graphs with a voice-activity model; the Realtime API's server VAD). `samples`: 16 kHz mono
    float32, a whole number of 512-sample frames; `state`: what the previous call of the same
    stream answered (empty for a stream's first call): the model's state travels with the
    stream, so the engine keeps nothing per stream and a stream that ends leaves nothing behind.
    Answered on a thread of its own, never queued behind transcriptions."""

    request_id: int
    samples: bytes
    state: bytes = b""


class Synthesize(msgspec.Struct, frozen=True, tag="synthesize"):
    """Speak `text` in `voice` (text-to-speech graphs; a voice of the graph, checked by the server)."""

    request_id: int
    text: str
    voice: str
    speed: float = 1.0
    """Pace, 1.0 the voice's own (hibari; the server refuses any other for SpeechT5)."""
    stream: bool = False
    """Send each piece of audio as it is spoken, in `SpeechAudio`s, before `Synthesized`."""


class Accepted(msgspec.Struct, frozen=True, tag="accepted"):
    request_id: int
    prompt_tokens: int
    prompt_tail: str = ""
    """The end of the rendered prompt (e.g. an opened `<think>` the output continues)."""
    prompt_text: str = ""
    """With `SamplingParams.echo`: the whole prompt as text (token ids decoded)."""


class Rejected(msgspec.Struct, frozen=True, tag="rejected"):
    """The request never reached the pipeline (bad input found while preparing it)."""

    request_id: int
    message: str
    code: str
    param: str | None = None


class TokenLogprob(msgspec.Struct, frozen=True, array_like=True):
    """One generated token: its text, log probability and exact bytes (a token may hold part of
    a UTF-8 character; its text then shows the bytes as `\\xNN` escapes)."""

    token: str
    logprob: float
    bytes: list[int]
    id: int = -1
    """The token id (the LMI/TGI token objects show it); -1 when unknown."""


class Delta(msgspec.Struct, frozen=True, tag="delta"):
    request_id: int
    text: str
    tokens: int
    """Tokens generated so far (the text may lag behind while a UTF-8 sequence is incomplete)."""
    index: int = 0
    """Which of the request's sequences (0..n-1)."""
    logprobs: list[TokenLogprob] | None = None
    """With `SamplingParams.logprobs`: the tokens whose text is in this delta."""


class Finished(msgspec.Struct, frozen=True, tag="finished"):
    request_id: int
    finish_reason: Literal["stop", "length", "cancelled", "error"]
    prompt_tokens: int
    completion_tokens: int
    """Of this sequence."""
    text: str = ""
    """Text flushed at the end (held-back bytes of the detokenizer)."""
    error: str = ""
    index: int = 0
    logprobs: list[TokenLogprob] | None = None
    stop_string: str | None = None
    """The stop string the text ended at (None: the end-of-sequence token, a stop token, a limit)."""


class Tokenized(msgspec.Struct, frozen=True, tag="tokenized"):
    request_id: int
    tokens: list[int]
    token_strs: list[str]


class Detokenized(msgspec.Struct, frozen=True, tag="detokenized"):
    request_id: int
    text: str


class Embedded(msgspec.Struct, frozen=True, tag="embedded"):
    request_id: int
    vectors: bytes
    """float32 little-endian, one vector of `size` values per text, in order."""
    size: int
    prompt_tokens: int


class Reranked(msgspec.Struct, frozen=True, tag="reranked"):
    request_id: int
    scores: list[float]
    """One per document, in the documents' order."""
    prompt_tokens: int


class Transcribed(msgspec.Struct, frozen=True, tag="transcribed"):
    """A transcription's result: the whole text, its segments and words as (start, end, text) in
    seconds when asked for, the language (ISO code; "" when not known) and the tokens decoded."""

    request_id: int
    text: str
    segments: list[tuple[float, float, str]] = []
    words: list[tuple[float, float, str]] = []
    language: str = ""
    tokens: int = 0


class VoiceDetected(msgspec.Struct, frozen=True, tag="voice_detected"):
    """`DetectVoice`'s answer: one speech probability per frame (float32 little-endian) and the
    stream's state to send with its next samples."""

    request_id: int
    probabilities: bytes
    state: bytes


class SpeechAudio(msgspec.Struct, frozen=True, tag="speech_audio"):
    """A streamed synthesis's next piece (a sentence): mono float32 little-endian samples."""

    request_id: int
    samples: bytes
    sample_rate: int
    last: bool = True
    """No piece follows (a wav header can then give the exact length)."""


class Synthesized(msgspec.Struct, frozen=True, tag="synthesized"):
    """Speech: mono float32 little-endian samples at `sample_rate` Hz (none when streamed: they came
    in `SpeechAudio`s), the text's tokens (hibari: phonemes) and the acoustic frames the model made
    (hibari: one per 12.5 ms; 0 when the pipeline does not say). A whole answer is a few MB to
    about 30 MB (the server bounds the text: 4096 characters are about 5 min of speech), one
    msgpack bin field: decoding it on the event loop is one copy (about 1 ms per 10 MB), so it
    needs no raw frame of its own."""

    request_id: int
    samples: bytes
    sample_rate: int
    tokens: int = 0
    frames: int = 0


class TaskFrames(msgspec.Struct, frozen=True, kw_only=True):
    """One task an engine serves (`graphfiles.Task`): the frames it adds to the pipe, the routes
    that call it and the engine process's side that serves it. Adding a task is one of these in
    `TASKS` (docs/architecture.md, "How to add... an engine task")."""

    routes: str
    """The routes that send its commands (a 400 for a model of another task names them)."""
    article: str
    """How the task's model is called in that 400: "an embedding" (model)."""
    commands: tuple[type, ...]
    """What the server sends (each with a `request_id`)."""
    answers: tuple[type, ...]
    """What the engine answers one command with (else `Rejected`), resolving the server's call."""
    progress: tuple[type, ...] = ()
    """What the engine sends before the answer, to the call's listener (a streamed transcript's text)."""
    engine: str
    """The engine process's module whose `open_engine(graph)` builds the engine (imported there only)."""


TASKS: dict[str, TaskFrames] = {
    "generate": TaskFrames(
        routes="chat, completions and responses",
        article="a generative",
        commands=(Submit, Tokenize, Detokenize),
        answers=(Accepted, Tokenized, Detokenized),
        engine="appliance.engine.worker.batching",
    ),
    "embed": TaskFrames(
        routes="/v1/embeddings",
        article="an embedding",
        commands=(Embed,),
        answers=(Embedded,),
        engine="appliance.engine.worker.retrieval",
    ),
    "rerank": TaskFrames(
        routes="/v1/rerank",
        article="a rerank",
        commands=(Rerank,),
        answers=(Reranked,),
        engine="appliance.engine.worker.retrieval",
    ),
    "transcribe": TaskFrames(
        routes="/v1/audio/transcriptions and /v1/audio/translations",
        article="a speech-to-text",
        commands=(Transcribe, DetectVoice),
        answers=(Transcribed, VoiceDetected),
        progress=(Delta,),
        engine="appliance.engine.worker.speech",
    ),
    "synthesize": TaskFrames(
        routes="/v1/audio/speech",
        article="a text-to-speech",
        commands=(Synthesize,),
        answers=(Synthesized,),
        progress=(SpeechAudio,),
        engine="appliance.engine.worker.tts",
    ),
}
"""Every task, keyed by `graphfiles.Task`: the unions below, the server's dispatch (`host/client`,
`host/calls`) and the engine process's (`worker/process`, `worker/inbox`) are read from here."""


def _kinds(part: str) -> tuple[type, ...]:
    return tuple(dict.fromkeys(kind for task in TASKS.values() for kind in getattr(task, part)))


COMMANDS = _kinds("commands")
"""Every task's commands: what a `Cancel` can overtake in the engine's inbox."""
ANSWERS = (*_kinds("answers"), Rejected)
"""What resolves a call of the server (`EngineClient._deliver`)."""
PROGRESS = _kinds("progress")
"""What goes to a call's listener before its answer."""

Command = Union[COMMANDS]  # noqa: UP007 (a union built from the table: `|` needs the types written out)
ToEngine = Union[(*COMMANDS, Cancel, Shutdown)]  # noqa: UP007
EngineEvent = Union[tuple(dict.fromkeys((*ANSWERS, *PROGRESS, Delta, Finished)))]  # noqa: UP007


class Batch(msgspec.Struct, frozen=True, tag="batch"):
    events: list[EngineEvent]


class Ready(msgspec.Struct, frozen=True, tag="ready"):
    max_context: int
    load_seconds: float
    vision_tokens: list[str] = []
    """Vision graphs: the model's own image/video marker tokens, refused in user text."""
    gguf_reader: str = ""
    """GGUF graphs: the GGUF_READER the engine process loaded the file with."""
    template_renders_tools: bool = True
    """The chat template reads `tools` (else the service shows them in a system message)."""
    template_renders_tool_calls: bool = True
    """The chat template reads assistant messages' `tool_calls` (else the service writes them as text)."""
    template_tool_parser: str = ""
    """The call format the chat template (or the tokenizer's tokens) teaches, when recognised."""
    template_tool_reason: str = ""
    template_reasoning_parser: str = ""
    """The reasoning format the chat template shows, when recognised (think, harmony)."""
    template_reasoning_reason: str = ""
    embedding_size: int = 0
    """Embedding graphs: the length of the model's vectors."""


class LoadFailed(msgspec.Struct, frozen=True, tag="load_failed"):
    message: str


class Stats(msgspec.Struct, frozen=True, tag="stats"):
    running: int
    """Requests inside the pipeline (scheduled or waiting for KV blocks)."""
    kv_cache_usage: float
    """Fraction of the KV cache in use, 0..1."""
    steps: int
    waiting: int = 0
    """Of `running`, those the scheduler did not schedule in the last step."""
    draft_tokens: int = 0
    """Speculative decoding / prompt lookup, since the engine started: candidate tokens validated."""
    accepted_tokens: int = 0
    """Of `draft_tokens`, those the main model accepted."""
    stalled_seconds: float = 0.0
    """Stateful engine: how long its running request has waited for a token (its command thread
    keeps sending stats while `generate()` runs, so a stuck pipeline shows here, not as silence).
    0 while idle, and from the continuous-batching engine, which sends nothing during a step."""


FromEngine = Batch | Ready | LoadFailed | Stats

encoder = msgspec.msgpack.Encoder()
_to_engine = msgspec.msgpack.Decoder(ToEngine)
_from_engine = msgspec.msgpack.Decoder(FromEngine)


def decode_to_engine(data: bytes) -> ToEngine:
    return _to_engine.decode(data)


def _image_submit(message: object) -> bool:
    return isinstance(message, Submit) and isinstance(message.prompt, ChatPrompt) and bool(message.prompt.images)


def encode_to_engine(message: ToEngine) -> list[bytes | memoryview]:
    """The frames of `message`: one msgpack frame, then, for a Submit with images, one raw frame of
    pixels per image, for a Transcribe one of samples. They go into the pipe as they are:
    msgpack-encoding them would copy megabytes on the event loop while holding the GIL (~30 ms for
    a 12 MP photo)."""
    if isinstance(message, Transcribe):
        return [encoder.encode(msgspec.structs.replace(message, samples=b"")), message.samples]
    if not _image_submit(message):
        return [encoder.encode(message)]
    images = message.prompt.images
    shapes = [ImageData(width=image.width, height=image.height, pixels=memoryview(b"")) for image in images]
    head = msgspec.structs.replace(message, prompt=msgspec.structs.replace(message.prompt, images=shapes))
    return [encoder.encode(head), *(image.pixels for image in images)]


class ToEngineDecoder:
    """Reassembles the messages `encode_to_engine` framed; `feed` returns each once complete."""

    def __init__(self) -> None:
        self._pending: Submit | Transcribe | None = None
        self._pixels: list[memoryview] = []

    def feed(self, frame: bytes) -> ToEngine | None:
        if self._pending is None:
            message = _to_engine.decode(frame)
            if not (_image_submit(message) or isinstance(message, Transcribe)):
                return message
            self._pending, self._pixels = message, []
            return None
        if isinstance(self._pending, Transcribe):
            transcribe, self._pending = self._pending, None
            return msgspec.structs.replace(transcribe, samples=frame)
        self._pixels.append(memoryview(frame))
        submit = self._pending
        images = submit.prompt.images
        if len(self._pixels) < len(images):
            return None
        self._pending = None
        filled = [msgspec.structs.replace(image, pixels=pixels) for image, pixels in zip(images, self._pixels)]
        return msgspec.structs.replace(submit, prompt=msgspec.structs.replace(submit.prompt, images=filled))


def decode_from_engine(data: bytes) -> FromEngine:
    return _from_engine.decode(data)


def merge_deltas(first: Delta, second: Delta) -> Delta:
    """One delta holding the text and tokens of two consecutive deltas of the same sequence."""
    logprobs = None
    if first.logprobs is not None or second.logprobs is not None:
        logprobs = [*(first.logprobs or ()), *(second.logprobs or ())]
    return Delta(
        request_id=first.request_id,
        text=first.text + second.text,
        tokens=second.tokens,
        index=first.index,
        logprobs=logprobs,
    )
