#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write one man page per documented public function from Doxygen's XML.

Usage: gen-man.py XML_DIR OUT_DIR VERSION

The pages follow liburing's layout: NAME, SYNOPSIS, DESCRIPTION (with the
parameters), RETURN VALUE, ERRORS, NOTES, SEE ALSO.  Everything comes from the
doc comments in the public headers, so a page cannot drift from the header:
the errors are the negative errno names the @return text lists, each with the
clause that follows it ("`-EINVAL` for a NULL handle").  Functions of one
header see each other in SEE ALSO.  Section 3 pages go to OUT_DIR/man3.
"""
import os
import re
import sys
import xml.etree.ElementTree as ET

# What an errno means when the doc gives no reason of its own.
ERRNO_TEXT = {
    "EINVAL": "an argument is invalid (a NULL or deleted handle, a bad flag).",
    "ERANGE": "an offset or range lies outside the zbuf.",
    "ENOMEM": "memory ran out; nothing changed.",
    "ENOBUFS": "no pool buffer or descriptor was available.",
    "EAGAIN": "the operation would block; try again later.",
    "EMSGSIZE": "the message is larger than the limit.",
    "EBADF": "the descriptor is not valid.",
    "EPIPE": "the peer closed the connection.",
    "ECONNRESET": "the peer reset the connection.",
    "ETIMEDOUT": "the operation timed out.",
    "ENOTCONN": "the socket is not connected.",
    "EBUSY": "the object is in use.",
    "ENOENT": "the object does not exist.",
    "EEXIST": "the object already exists.",
    "ENOSPC": "a table or ring is full.",
    "EPROTO": "the peer broke the protocol.",
    "ENOTSUP": "the operation is not supported here.",
    "EOPNOTSUPP": "the operation is not supported here.",
    "EPERM": "the caller lacks the privilege.",
    "ENODEV": "the device does not exist.",
    "ENXIO": "the device went away.",
    "EALREADY": "the operation is already in progress.",
    "EINPROGRESS": "the operation started and completes later.",
    "ECANCELED": "the operation was cancelled.",
    "EOVERFLOW": "a count or size would overflow.",
    "ENOSYS": "the kernel lacks the feature.",
    "EADDRINUSE": "the address is in use.",
    "EADDRNOTAVAIL": "the address is not available.",
    "ECONNREFUSED": "the peer refused the connection.",
    "EHOSTUNREACH": "the host is unreachable.",
    "ENETUNREACH": "the network is unreachable.",
    "EISCONN": "the socket is already connected.",
    "ESHUTDOWN": "the stream was shut down.",
    "EIO": "an input/output error occurred.",
}


def esc(text):
    """Escape text for roff: backslashes, hyphens, and quotes at a line start."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "".join(c if ord(c) < 128 else "\\[u%04X]" % ord(c) for c in text)


def inline(node):
    """Render the inline content of a Doxygen XML element as roff text."""
    out = []
    if node.text:
        out.append(esc(node.text))
    for child in node:
        tag = child.tag
        inner = inline(child)
        if tag == "computeroutput":
            out.append("\\fB" + inner + "\\fR")
        elif tag in ("emphasis",):
            out.append("\\fI" + inner + "\\fR")
        elif tag in ("bold",):
            out.append("\\fB" + inner + "\\fR")
        elif tag in ("ref", "ulink"):
            out.append(inner)
        elif tag in ("parameterlist", "simplesect", "itemizedlist", "orderedlist",
                     "programlisting", "verbatim", "xrefsect", "heading"):
            pass  # block content: handled by blocks()
        elif tag == "linebreak":
            out.append("\n.br\n")
        elif tag == "sp":
            out.append(" ")
        elif tag == "ndash":
            out.append("\\(en")
        elif tag == "mdash":
            out.append("\\(em")
        else:
            out.append(inner)
        if child.tail:
            out.append(esc(child.tail))
    return "".join(out)


def fix_lines(text):
    """Collapse whitespace and keep roff control characters off line starts."""
    text = re.sub(r"[ \t]*\n[ \t]*", "\n", text)
    lines = []
    for line in text.split("\n"):
        line = re.sub(r"[ \t]+", " ", line).strip()
        if not line:
            continue
        if line[0] in ".'" and not line.startswith((".br", ".IP", ".TP", ".nf", ".fi", ".PP", ".RS", ".RE")):
            line = "\\&" + line
        lines.append(line)
    return "\n".join(lines)


def code_lines(node):
    """The lines of a programlisting or verbatim block."""
    if node.tag == "verbatim":
        return (node.text or "").strip("\n").split("\n")
    lines = []
    for cl in node.iter("codeline"):
        parts = []
        for el in cl.iter():
            if el.tag == "sp":
                parts.append(" ")
            elif el.text and el.tag not in ("codeline", "highlight"):
                parts.append(el.text)
            elif el.tag == "highlight" and el.text:
                parts.append(el.text)
            if el is not cl and el.tail and el.tag != "highlight":
                parts.append(el.tail)
            elif el.tag == "highlight" and el.tail:
                parts.append(el.tail)
        lines.append("".join(parts))
    return lines


def blocks(para, sections):
    """Turn one <para> into roff paragraphs; route simplesects to sections."""
    out = [fix_lines(inline(para))]
    for child in para:
        if child.tag == "simplesect":
            kind = child.get("kind")
            text = "\n".join(p for p in (render_paras(child, sections)) if p)
            sections.setdefault(kind, []).append(text)
        elif child.tag in ("itemizedlist", "orderedlist"):
            n = 0
            for item in child.findall("listitem"):
                n += 1
                mark = "\\(bu" if child.tag == "itemizedlist" else "%d." % n
                body = "\n".join(render_paras(item, sections))
                out.append(".IP %s 3\n%s" % (mark, body))
            out.append(".PP")
        elif child.tag in ("programlisting", "verbatim"):
            lines = [esc(l) for l in code_lines(child)]
            lines = ["\\&" + l if l.startswith((".", "'")) else l for l in lines]
            out.append(".PP\n.RS 4\n.nf\n" + "\n".join(lines) + "\n.fi\n.RE\n.PP")
        elif child.tag == "parameterlist" and child.get("kind") in ("param", "retval"):
            items = []
            for item in child.findall("parameteritem"):
                names = [inline(n) for n in item.iter("parametername")]
                desc = "\n".join(render_paras(item.find("parameterdescription"), sections))
                items.append((", ".join(names), desc))
            sections.setdefault(child.get("kind"), []).extend(items)
        elif child.tag == "xrefsect":
            title = child.findtext("xreftitle") or ""
            body = "\n".join(render_paras(child.find("xrefdescription"), sections))
            sections.setdefault("note", []).append("%s: %s" % (esc(title), body))
    return [b for b in out if b.strip()]


def render_paras(node, sections):
    if node is None:
        return []
    out = []
    for para in node.findall("para"):
        out.extend(blocks(para, sections))
    return out


def plain(node):
    return "".join(node.itertext()) if node is not None else ""


def errors_from(return_text):
    """The (errno, reason) pairs a @return text names, in order."""
    found = []
    seen = set()
    # Split on ';' and on sentence ends; each clause may name one or more errnos.
    for clause in re.split(r";|\.\s", return_text):
        names = re.findall(r"\\-(E[A-Z0-9]+)", clause)
        if not names:
            continue
        reason = re.sub(r"\\fB\\-E[A-Z0-9]+\\fR|\\-E[A-Z0-9]+", "", clause)
        reason = re.sub(r"^[\s,:/or]*(?:or\s+)?", "", reason).strip(" ,.")
        reason = re.sub(r"^(?:or|and)\s+", "", reason)
        for name in names:
            if name in seen:
                continue
            seen.add(name)
            found.append((name, reason))
    return found


def error_text(err, reason):
    """The ERRORS entry of one errno: the doc's own reason, else a generic one."""
    generic = ERRNO_TEXT.get(err, "see RETURN VALUE.")
    if len(reason) <= 3:
        return generic[0].upper() + generic[1:]
    if reason.startswith("("):
        return generic[0].upper() + generic[1:-1] + " " + reason + "."
    return reason[0].upper() + reason[1:] + "."


def synopsis(md, header):
    ret = plain(md.find("type")).strip()
    name = md.findtext("name")
    args = plain(md.find("argsstring")).strip()
    proto = "%s %s%s;" % (ret, name, args)
    proto = proto.replace(" *", " *").replace("( ", "(")
    if md.get("inline") == "yes" or md.get("static") == "yes":
        proto = "static inline " + proto
    return ".nf\n.B #include <%s>\n.PP\n.BI \"%s\"\n.fi" % (header, esc(proto).replace('"', '\\(dq'))


def page(md, header, siblings, version):
    name = md.findtext("name")
    sections = {}
    brief = fix_lines(" ".join(render_paras(md.find("briefdescription"), sections)))
    body = render_paras(md.find("detaileddescription"), sections)
    lines = ['.TH %s 3 "" "libzbuf %s" "libzbuf Manual"' % (name.upper().replace("_", "\\_"), version)]
    lines += [".SH NAME", "%s \\- %s" % (esc(name), re.sub(r"\s+", " ", brief).rstrip(".") or esc(name))]
    lines += [".SH SYNOPSIS", synopsis(md, header)]
    lines += [".SH DESCRIPTION"]
    desc = [b for b in body if b.strip()]
    lines += [brief, ".PP"]
    for b in desc:
        lines += [b, ".PP"]
    if sections.get("param"):
        lines += [".SS Parameters"]
        for pname, pdesc in sections["param"]:
            lines += [".TP", ".I %s" % pname, pdesc or "(undocumented)"]
    rets = sections.get("return", []) + ["%s: %s" % (n, d) for n, d in sections.get("retval", [])]
    if rets:
        lines += [".SH RETURN VALUE"] + [r for r in rets]
        errs = errors_from(" ".join(rets))
        if errs:
            lines += [".SH ERRORS"]
            for err, reason in errs:
                lines += [".TP", ".B \\-%s" % err, error_text(err, reason)]
    notes = sections.get("note", []) + sections.get("warning", []) + sections.get("attention", [])
    pre = sections.get("pre", [])
    post = sections.get("post", [])
    if notes or pre or post:
        lines += [".SH NOTES"]
        for n in pre:
            lines += [".PP", "Before the call: " + n]
        for n in post:
            lines += [".PP", "After the call: " + n]
        for n in notes:
            lines += [".PP", n]
    refs = [s for s in siblings if s != name][:12]
    lines += [".SH SEE ALSO"]
    for s in sections.get("see", []):
        lines += [s, ".PP"]
    refs = ["%s (3)" % esc(r) for r in refs] + ["%s (3)" % header_page(header), "libzbuf (7)"]
    lines += [",\n".join(".BR " + r for r in refs)]
    text = "\n".join(l for l in lines if l is not None) + "\n"
    # Remove empty paragraphs that the block walk leaves behind.
    text = re.sub(r"(\.PP\n)+", ".PP\n", text)
    text = re.sub(r"\.PP\n(\.(SH|SS|TP) )", r"\1", text)
    text = re.sub(r"\.PP\n(\.(SH|SS|TP)\n)", r"\1", text)
    return text


def header_page(header):
    """zbuf/core.h -> zbuf_core.h, the name of the header's own page."""
    return header.replace("/", "_")


def header_man(cdef, header, groups, version):
    """The page of one header: its overview and its functions by group."""
    sections = {}
    name = header_page(header)
    brief = fix_lines(" ".join(render_paras(cdef.find("briefdescription"), sections)))
    body = render_paras(cdef.find("detaileddescription"), sections)
    lines = ['.TH %s 3 "" "libzbuf %s" "libzbuf Manual"' % (esc(name).upper().replace("_", "\\_"), version),
             ".SH NAME", "%s \\- %s" % (esc(name), brief.rstrip(".")),
             ".SH SYNOPSIS", ".nf", ".B #include <%s>" % header, ".fi", ".SH DESCRIPTION"]
    for b in body:
        lines += [b, ".PP"]
    for title, names in groups:
        if not names:
            continue
        lines += [".SS %s" % esc(title or "Functions")]
        lines += [",\n".join(".BR %s (3)" % esc(n) for n in names)]
    lines += [".SH SEE ALSO", ".BR libzbuf (7)"]
    text = "\n".join(lines) + "\n"
    return re.sub(r"(\.PP\n)+(\.S[HS] )", r"\2", text)


def overview_man(headers, version):
    """libzbuf(7): what the library is and where each header's page is."""
    lines = ['.TH LIBZBUF 7 "" "libzbuf %s" "libzbuf Manual"' % version,
             ".SH NAME", "libzbuf \\- zero\\-copy segmented network buffers",
             ".SH DESCRIPTION",
             "A zbuf is a byte sequence made of segments; segments reference buffers that many",
             "zbufs may share, and each enrolled buffer carries a release callback that runs",
             "exactly once, when the last reference goes.  Every function returns 0 (or a",
             "non\\-negative count) on success and a negative errno on failure, and a call that",
             "fails changes nothing.",
             ".PP", "Each header has a page that lists its functions:"]
    lines += [",\n".join(".BR %s (3)" % esc(header_page(h)) for h, _ in sorted(headers))]
    lines += [".SH SEE ALSO", "The guides installed with the documentation, and",
              ".BR pkg\\-config (1)", "modules", ".BR zbuf ,",
              ".BR zbuf\\-sock ,", ".BR zbuf\\-uv", "and the other adapters."]
    return "\n".join(lines) + "\n"


def main():
    xml_dir, out_dir, version = sys.argv[1:4]
    index = ET.parse(os.path.join(xml_dir, "index.xml")).getroot()
    man3 = os.path.join(out_dir, "man3")
    os.makedirs(man3, exist_ok=True)
    written = 0
    headers = []
    for comp in index.findall("compound"):
        if comp.get("kind") != "file":
            continue
        root = ET.parse(os.path.join(xml_dir, comp.get("refid") + ".xml")).getroot()
        cdef = root.find("compounddef")
        loc = cdef.find("location").get("file")
        m = re.search(r"include/(zbuf/[^/]+\.h)$", loc)
        if not m:
            continue
        header = m.group(1)
        groups = []
        for sd in cdef.findall("sectiondef"):
            funcs = [md for md in sd.findall("memberdef") if md.get("kind") == "function"]
            names = [md.findtext("name") for md in funcs]
            groups.append((sd.findtext("header"), names))
            for md in funcs:
                with open(os.path.join(man3, md.findtext("name") + ".3"), "w") as f:
                    f.write(page(md, header, names, version))
                written += 1
        with open(os.path.join(man3, header_page(header) + ".3"), "w") as f:
            f.write(header_man(cdef, header, groups, version))
        headers.append((header, groups))
    man7 = os.path.join(out_dir, "man7")
    os.makedirs(man7, exist_ok=True)
    with open(os.path.join(man7, "libzbuf.7"), "w") as f:
        f.write(overview_man(headers, version))
    print("gen-man: %d function pages, %d header pages in %s" % (written, len(headers), out_dir))


if __name__ == "__main__":
    main()
