"""The credential checks written as string methods agree with the patterns they replaced.

`_client/credentials.py` once compiled three regular expressions at import; these tests
keep those patterns as the reference and compare on arbitrary text, weighted towards the
characters at the edges of each rule (space, tab, DEL, `:`, `/`, upper case, non-ASCII).
"""

from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from anyinfer._client import credentials

_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*)://")
_KEY_OK = re.compile(r"[\x21-\x7e]+")
_HEADER_OK = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")

_EDGES = st.sampled_from(list(" \t\n\r\x00\x1f\x7f\x80é:/+.-_aAzZ09\u2028\u00a0"))
_TEXT = st.text(st.one_of(_EDGES, st.characters()), max_size=24)


@given(st.one_of(_TEXT, st.builds(lambda a, b: a + "://" + b, _TEXT, _TEXT)))
@example("env://OPENAI_API_KEY")
@example("credential+v1.x-y://name")
@example("Env://X")
@example("a:b://c")
@example("://x")
@example("1a://x")
def test_reference_detection_matches_the_scheme_pattern(value: str) -> None:
    assert credentials._is_reference(value) == bool(_SCHEME.match(value))


@given(_TEXT)
@example("")
@example(" ")
@example("sk-abc")
@example("Bearer sk-abc")
@example("Bearer  sk-abc ")
@example(" sk")
@example("sk\x7f")
@example("sk\u00e9")
def test_sendable_matches_the_key_and_header_patterns(value: str) -> None:
    assert credentials._sendable(value, header=False) == bool(_KEY_OK.fullmatch(value))
    assert credentials._sendable(value, header=True) == bool(_HEADER_OK.fullmatch(value))
