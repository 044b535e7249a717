"""What codeshim puts into a program that makes no intercepted request
("a pass-through that costs nothing"): no library of its own in
the program's global symbol scope besides libcodeshim.so itself (each one
there is checked by every other symbol lookup of the process), libcjson
loaded only once a request is codeshim's, and a CLONE_VM spawn child that
never reaches the lazy-binding resolver."""

import json
import re
import subprocess

from conftest import LIB, REPO, run

CURL = "/usr/bin/curl"
PLAIN = {"model": "m", "input": "hello",
         "tools": [{"type": "function", "name": "f", "parameters": {}}]}
OURS = {"model": "m", "input": "hello",
        "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}


def loaded_objects(preload):
    """The objects the loader maps for curl at start-up (ldd's view)."""
    rc, out, err = run([CURL, "--version"], env={"LD_TRACE_LOADED_OBJECTS": "1"},
                       preload=preload)
    assert rc == 0, err
    names = set()
    for line in out.decode().splitlines():
        m = re.match(r"\s*(\S+)", line)
        if m and "vdso" not in m.group(1):
            names.add(m.group(1).split("/")[-1])
    return names


def test_preloading_adds_only_the_library_itself():
    extra = loaded_objects(True) - loaded_objects(False)
    assert extra == {LIB.name}, extra


def post(fake, body):
    return run([CURL, "-sS", fake.url + "/responses", "-H", "Content-Type: application/json",
                "--data-binary", json.dumps(body)],
               env={"OPENAI_API_KEY": "sk-test", "LD_DEBUG": "files"})


def test_pass_through_never_loads_libcjson(fake):
    rc, out, err = post(fake, PLAIN)
    assert rc == 0, err
    assert json.loads(out)["object"] == "response"
    assert b"libcjson" not in err


def test_an_intercepted_request_loads_libcjson_then(fake):
    rc, out, err = post(fake, OURS)
    assert rc == 0, err
    assert json.loads(out)["object"] == "response"
    assert b"libcjson.so.1" in err


def plt_calls(obj):
    """Undefined symbols obj calls through the PLT (R_X86_64_PLT32): with
    lazy binding, the first such call enters the loader's resolver."""
    undefined = set(subprocess.run(["nm", "--undefined-only", "--format=posix", obj],
                                   capture_output=True, text=True, check=True)
                    .stdout.split()[::2])
    relocs = subprocess.run(["readelf", "-rW", obj], capture_output=True, text=True,
                            check=True).stdout
    return {f[4] for f in (l.split() for l in relocs.splitlines())
            if len(f) >= 5 and f[2] == "R_X86_64_PLT32" and f[4] in undefined}


def bind_now(lib):
    dyn = subprocess.run(["readelf", "-dW", lib], capture_output=True, text=True,
                         check=True).stdout
    return "BIND_NOW" in dyn or "Flags: NOW" in dyn


def test_the_clone_vm_child_never_meets_the_lazy_resolver():
    """spawn.c's child (spawn_child.c) shares the host's memory on a 64 KB
    stack: every function it calls must be bound before it runs, by -z now
    or through GOT slots the loader fills at load time (-fno-plt)."""
    spawn = REPO / "build" / "obj" / "shim" / "sandbox" / "local" / "spawn_child.o"
    assert bind_now(LIB) or not plt_calls(spawn), sorted(plt_calls(spawn))
