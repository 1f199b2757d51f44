"""Ranking of the catalog's logical tools for a search query: BM25F over weighted fields.

English, German and Chinese queries meet the same index: words are case-folded, German
umlauts folded to ae/oe/ue (the index also keeps the plain vowel), short endings stemmed,
traditional Chinese folded to simplified, Chinese and Japanese text cut into characters and
2- to 4-grams; stop words of the three languages are dropped.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator, Mapping

# Field weights of the BM25F index (name and keywords say most about intent; prose least).
FIELD_WEIGHTS = {
    "name": 3.0,
    "intent": 3.0,
    "topic": 0.5,
    "params": 1.0,
    "title": 1.0,
    "description": 0.15,
}
_K1 = 1.2
_CJK_UNIGRAM_WEIGHT = 0.3
_MAX_CJK_GRAM = 4
_MIN_STEM = 4
_B = 0.75
_STOPWORD_TEXT = (
    "a an the to of for with and or in on at by as is are was were be been it its this that "
    "these those there here my me i we our you your he she they them from into up out over "
    "any some each no not only also but if then so than such can could will would "
    "should may might must do does did has have had please want need like what how whose "
    "e g etc input one two new other same "
    "ich wir ein eine einen einem einer der die das den dem des mit für und oder zu ist sind "
    "war hat habe haben es gibt bitte von vom zum zur im am an "
    "auf beim bei noch schon jetzt nur auch nicht wie was wo durch "
    "我 的 了 吗 呢 个 一 这 那 帮 请 要 想 是 在 和 给 把 吧 啊 下 有"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_WORD = re.compile(r"[^\W_]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# Traditional Chinese forms of the characters the index's Chinese words use, to their simplified
# forms (the index is simplified): complete for matching, as a character the index lacks matches
# nothing either way (``test_catalog`` ties each target to the vocabulary).
_TRADITIONAL = str.maketrans(
    "專個麼麽準況歷曆嗎諮單佔尋師幫廢錄態換時檔樣狀約給繳認記詢詳請調費過還這進遲鎖問閒閑間顧預訂確銷",
    "专个么么准况历历吗咨单占寻师帮废录态换时档样状约给缴认记询详请调费过还这进迟锁问闲闲间顾预订确销",
)
_UMLAUTS = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue"})
_PLAIN = str.maketrans({"ä": "a", "ö": "o", "ü": "u"})
_SUFFIXES = ("en", "es", "e", "s")


def tokenize(text: str, *, index: bool = False) -> list[str]:
    """Search terms of ``text``: casefolded NFKC words; CJK characters and 2- to 4-grams.

    Traditional Chinese characters of the index's vocabulary fold to their simplified forms.
    German umlauts fold to ``ae``/``oe``/``ue``; an ``index`` tokenisation also keeps the plain
    vowel (``bestatigen``) so a query typed without umlauts matches too.
    """
    spaced = _CAMEL.sub(" ", text)
    normalised = unicodedata.normalize("NFKC", spaced).casefold().translate(_TRADITIONAL)
    terms: list[str] = []
    for word in _WORD.findall(normalised):
        for part in _CJK.split(word):
            if part:
                terms.extend(_latin_terms(part, index=index))
        for run in _CJK.findall(word):
            terms.extend(ch for ch in run if ch not in _STOPWORDS)
            terms.extend(
                run[i : i + n] for n in range(2, _MAX_CJK_GRAM + 1) for i in range(len(run) - n + 1)
            )
    return terms


def keyword_terms(words: str) -> list[str]:
    """Index terms of a keyword list: a CJK keyword stays one term (plus its characters).

    Without word segmentation a query is cut into every 2- to 4-gram, so a keyword like
    ``可预约`` ("bookable") matches as a whole instead of leaking its part ``预约`` ("book").
    """
    terms: list[str] = []
    for word in words.split():
        if _CJK.fullmatch(word) and len(word) <= _MAX_CJK_GRAM:
            terms.append(word)
            terms.extend(ch for ch in word if ch not in _STOPWORDS)
        else:
            terms.extend(tokenize(word, index=True))
    return terms


def _latin_terms(word: str, *, index: bool) -> Iterator[str]:
    if word in _STOPWORDS:
        return
    yield _stem(word.translate(_UMLAUTS))
    if index and word.translate(_PLAIN) != word:
        yield _stem(word.translate(_PLAIN))


def _stem(word: str) -> str:
    """Strip plural and inflection endings (-en, -es, -e, -s) while four letters remain."""
    changed = True
    while changed:
        changed = False
        for suffix in _SUFFIXES:
            if (
                word.endswith(suffix)
                and len(word) - len(suffix) >= _MIN_STEM
                and not word.endswith("ss")
            ):
                word = word[: -len(suffix)]
                changed = True
                break
    return word


class Bm25fIndex:
    """BM25F over a few documents with weighted fields (Robertson & Zaragoza 2009, section 3).

    Written here, not taken from a library: the corpus is a few fixed documents needing field
    weights, CJK n-grams and umlaut folding that no BM25 package on our pins offers, and fifty
    lines do not justify a dependency.
    """

    def __init__(self, documents: Mapping[str, Mapping[str, list[str]]]) -> None:
        self._fields = {
            doc: {f: Counter(t) for f, t in fs.items()} for doc, fs in documents.items()
        }
        self._lengths = {doc: {f: len(t) for f, t in fs.items()} for doc, fs in documents.items()}
        count = len(documents)
        self._average = {
            field: sum(lengths.get(field, 0) for lengths in self._lengths.values()) / count
            for field in FIELD_WEIGHTS
        }
        # Document frequency comes from the curated fields: schema prose mentions every tool's
        # verbs ("holds or reserves nothing"), which would otherwise erase their idf. A word
        # found only in prose takes its frequency from the prose.
        curated: Counter[str] = Counter()
        prose: Counter[str] = Counter()
        for fields in self._fields.values():
            curated.update(
                {t for f, counts in fields.items() if f != "description" for t in counts}
            )
            prose.update(set(fields.get("description", {})))
        self._idf = {
            term: math.log(1 + (count - n + 0.5) / (n + 0.5))
            for term in prose.keys() | curated.keys()
            for n in [curated.get(term) or prose[term]]
        }

    def score(self, doc: str, terms: set[str]) -> float:
        total = 0.0
        for term in terms:
            idf = self._idf.get(term)
            if idf is None:
                continue
            weighted = 0.0
            for field, counts in self._fields[doc].items():
                tf = counts.get(term, 0)
                if tf:
                    ratio = self._lengths[doc][field] / (self._average[field] or 1.0)
                    b = _B if field == "description" else 0.0  # curated lists: no length norm
                    weighted += FIELD_WEIGHTS[field] * tf / (1 - b + b * ratio)
            if weighted:
                total += _term_weight(term) * idf * weighted * (_K1 + 1) / (_K1 + weighted)
        return total


def _term_weight(term: str) -> float:
    """A single CJK character says little on its own; bigrams carry the meaning."""
    return _CJK_UNIGRAM_WEIGHT if len(term) == 1 and _CJK.match(term) else 1.0
