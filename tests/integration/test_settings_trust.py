"""Settings fail closed and mistakes are reported, through the curl CLI
under LD_PRELOAD against the fake upstream: a boolean that weakens
isolation is on only when it clearly says so, a misspelt CODESHIM_* name
is named with its nearest setting, a bad value says its range and the
default used, and a bad backend is one clear error in the answer."""

from test_core_responses import blocks, ci_items, logs_of, ours, post_json, req


def marker_probe(tmp_path):
    """Code that says whether it can see a file of the host's /tmp: it can
    only when it runs on the host, outside the sandbox."""
    marker = tmp_path / "host-marker"
    marker.write_text("host")
    return "import os\nprint('HOST' if os.path.exists(%r) else 'JAILED')\n" % str(marker)


def test_unreadable_no_isolation_keeps_the_sandbox(fake, tmp_path):
    code = marker_probe(tmp_path)
    for value in ("off", "OFF", "disabled", "maybe", "no", "0"):
        env = {"CODESHIM_UNSAFE_NO_ISOLATION": value}
        r = ours(fake.url + "/responses", req(blocks(code)), env=env)
        assert logs_of(ci_items(r)[0]) == "JAILED\n", (value, r)


def test_no_isolation_only_when_asked_plainly(fake, tmp_path):
    code = marker_probe(tmp_path)
    r = ours(fake.url + "/responses", req(blocks(code)),
             env={"CODESHIM_UNSAFE_NO_ISOLATION": "on"})
    assert logs_of(ci_items(r)[0]) == "HOST\n"


def test_offline_off_asks_the_upstream(fake):
    r = ours(fake.url + "/responses", req(blocks("print(6 * 7)")),
             env={"CODESHIM_OFFLINE": "off"})
    assert logs_of(ci_items(r)[0]) == "42\n"
    assert len(fake.requests()) == 2  # the model was asked, twice: not offline


def test_a_bad_boolean_is_named_with_the_accepted_values(fake):
    rc, st, r, err = post_json(fake.url + "/responses", req(blocks("print(1)")),
                               env={"CODESHIM_UNSAFE_NO_ISOLATION": "maybe"})
    assert st == 200, r
    err = err.decode()
    assert ("CODESHIM_UNSAFE_NO_ISOLATION=maybe: not a boolean (1/0, true/false, yes/no, "
            "on/off); isolation stays on") in err, err


def test_a_misspelt_name_is_warned_of_once_with_the_nearest(fake):
    rc, st, r, err = post_json(fake.url + "/responses", req(blocks("print(1)")),
                               env={"CODESHIM_OFLINE": "1"})
    assert st == 200, r
    err = err.decode()
    line = "CODESHIM_OFLINE is not a codeshim setting (did you mean CODESHIM_OFFLINE?)"
    assert err.count(line) == 1, err
    assert len(fake.requests()) == 2  # not offline: the name was not taken


def test_a_bad_value_says_its_range_and_default(fake):
    rc, st, r, err = post_json(fake.url + "/responses", req(blocks("print(1)")),
                               env={"CODESHIM_EXEC_TIMEOUT": "-5"})
    assert st == 200, r
    assert "CODESHIM_EXEC_TIMEOUT=-5: out of range 1..86400; using 60" in err.decode()


def test_a_size_takes_a_suffix(fake):
    # 1K of output: a 5000-byte print is cut to it
    r = ours(fake.url + "/responses", req(blocks("print('x' * 5000)")),
             env={"CODESHIM_OUTPUT_CAP": "1K"})
    logs = logs_of(ci_items(r)[0])
    assert "truncated" in logs and len(logs.encode()) <= 1024, logs


def test_a_bad_backend_is_one_clear_error(fake):
    rc, st, r, err = post_json(fake.url + "/responses", req(blocks("print(1)")),
                               env={"CODESHIM_SANDBOX": "e2bb"})
    assert (rc, st) == (0, 500), r
    assert r["error"]["code"] == "codeshim_config", r
    assert "CODESHIM_SANDBOX=e2bb is not one of local, e2b" in r["error"]["message"], r
    assert fake.requests() == []  # no model call ran code it could not run
    assert "Invalid argument" not in str(r)
    # a request codeshim does not take is untouched by it
    plain = req("hello", tools=[{"type": "function", "name": "f", "parameters": {}}])
    rc, st, r, _ = post_json(fake.url + "/responses", plain, env={"CODESHIM_SANDBOX": "e2bb"})
    assert (rc, st) == (0, 200) and r["object"] == "response", r


def table_of_settings():
    from conftest import REPO, run
    rc, out, err = run([REPO / "build" / "codeshim", "--settings"], preload=False)
    assert rc == 0, err
    return [l.split()[0] for l in out.decode().splitlines()]


def test_the_docs_list_exactly_the_settings_of_the_table():
    """README's configuration table and the man page's ENVIRONMENT section
    name every setting of the library's one table, and the README no other."""
    import re
    from conftest import REPO
    names = table_of_settings()
    assert "CODESHIM_UNSAFE_NO_ISOLATION" in names and "CODESHIM_CASSETTE" in names
    readme = (REPO / "README.md").read_text()
    config = readme[readme.index("## Configuration"):]
    config = config[:config.index("\n## ", 5)]
    rows = set()
    for line in config.splitlines():
        if line.startswith("| `"):
            rows.update(re.findall(r"`([A-Z][A-Z0-9_]+)`", line.split("|")[1]))
    assert rows - {"CODESHIM_LIB"} == set(names), (rows ^ set(names))
    man = (REPO / "doc" / "codeshim.1").read_text()
    env = man[man.index(".SH ENVIRONMENT"):man.index(".SH NAMED SANDBOXES")]
    missing = [n for n in names if n not in env]
    assert missing == [], missing


def test_check_lists_misspelt_names_and_a_bad_backend():
    from conftest import REPO, run
    rc, out, err = run([REPO / "build" / "codeshim", "--check"], preload=False,
                       env={"CODESHIM_OFLINE": "1", "CODESHIM_SANDBOX": "e2bb"})
    out = out.decode()
    assert rc == 1, (out, err)
    assert "CODESHIM_OFLINE is not a codeshim setting (did you mean CODESHIM_OFFLINE?)" in out
    assert "CODESHIM_SANDBOX=e2bb is not one of local, e2b" in out
