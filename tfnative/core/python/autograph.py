"""AutoGraph: show the user's function, file and line for frames of converted code.

Inside a ``tf.function`` AutoGraph runs a converted copy of the user's
function (``tf__name`` in ``<tmp>/__autograph_generated_file<random>.py``).
While it runs, AutoGraph's ``converted_call`` is below it on the stack with
the converted function in its ``converted_f`` local, and that function's
``ag_source_map`` (``origin_info.create_source_map``) maps each generated
``LineLocation(file, line)`` to an ``OriginInfo(loc=Location(file, line, col),
function_name, ...)``.  We read those dicts from the target's memory (no call
into the target) and rewrite the frames, keeping the generated location as
``converted``.
"""

import re
from typing import Dict, List, Tuple

from .pyframes import PyFrame, PythonReader

GENERATED_RE = re.compile(r"__autograph_generated_file\w*\.py$")

# generated file -> {generated line: (user file, user line, user function)}
SourceMaps = Dict[str, Dict[int, Tuple[str, int, str]]]


def source_maps(reader: PythonReader, frames: List[PyFrame]) -> SourceMaps:
    maps: SourceMaps = {}
    L = reader.layout
    for f in frames:
        conv = f.objects.get("converted_f")
        if not conv:
            continue
        try:
            func_dict = reader.u64(conv + L.func_dict)
            if not func_dict:
                continue
            smap = next((v for k, v in reader.dict_items(func_dict) if reader.string(k) == "ag_source_map"), None)
            if not smap:
                continue
            for key, value in reader.dict_items(smap):
                gen_file, gen_line = reader.tuple_items(key)[:2]
                loc, fname = reader.tuple_items(value)[:2]
                src_file, src_line = reader.tuple_items(loc)[:2]
                entry = maps.setdefault(reader.string(gen_file) or "", {})
                entry[reader.int_value(gen_line)] = (
                    reader.string(src_file) or "?", reader.int_value(src_line), reader.string(fname) or "?")
        except MemoryError:
            continue
    return maps


def annotate(reader: PythonReader, frames: List[PyFrame]) -> None:
    """Rewrite, in place, the frames of AutoGraph-generated code to the user's source."""
    generated = [f for f in frames if f.file and GENERATED_RE.search(f.file)]
    if not generated:
        return
    maps = source_maps(reader, frames)
    for f in generated:
        origin = maps.get(f.file or "", {}).get(f.line or -1)
        if origin is None:
            continue
        f.converted = {"function": f.function, "file": f.file, "line": f.line}
        f.file, f.line, f.function = origin
