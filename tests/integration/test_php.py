"""PHP loads its curl extension with RTLD_DEEPBIND, which would hide a
preloaded library; codeshim's dlopen wrapper clears that flag. This runs a
plain PHP curl script under codeshim."""

import json
import shutil

import pytest

from conftest import run

PHP = shutil.which("php", path="/usr/bin")

SCRIPT = r"""
$ch = curl_init($argv[1] . "/responses");
curl_setopt($ch, CURLOPT_POST, true);
curl_setopt($ch, CURLOPT_POSTFIELDS, $argv[2]);
curl_setopt($ch, CURLOPT_HTTPHEADER, ["Content-Type: application/json"]);
curl_setopt($ch, CURLOPT_RETURNTRANSFER, true);
$out = curl_exec($ch);
echo json_encode(["code" => curl_getinfo($ch, CURLINFO_HTTP_CODE),
                  "type" => curl_getinfo($ch, CURLINFO_CONTENT_TYPE),
                  "body" => json_decode($out, true)]);
"""


@pytest.mark.skipif(PHP is None, reason="php-cli and php-curl are not installed")
def test_php_curl_extension_is_intercepted(fake):
    body = json.dumps({"model": "m", "input": "```python\nprint(6 * 7)\n```",
                       "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]})
    rc, out, err = run([PHP, "-r", SCRIPT, fake.url, body])
    assert rc == 0, err
    res = json.loads(out)
    assert res["code"] == 200 and res["type"] == "application/json"
    ci = [o for o in res["body"]["output"] if o["type"] == "code_interpreter_call"]
    assert ci[0]["outputs"][0]["logs"] == "42\n"
    assert all(t["type"] != "code_interpreter" for q in fake.requests() for t in q["body"]["tools"])
