"""chatfn/channels/wxcrypt.py (WXBizMsgCrypt, shared by the WeCom and Official Account
channels) against the example vectors the platforms publish with their sample code, and
against the fakes' own platform-side implementation (wx_platform.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("cryptography")

from chatfn.channels.wxcrypt import CryptError, WxCrypt, aes_key, read_xml  # noqa: E402
from tests.channels.wecom.wx_platform import PlatformCrypt, new_aes_key  # noqa: E402

# WeCom's sample (WXBizMsgCrypt's Sample.py / Sample.java, "使用示例一/二", the developer
# docs' 加解密库下载与返回码 page https://developer.work.weixin.qq.com/document/path/90307):
# token QDG6eK, corp id wx5823bf96d3bd56c7, the URL check and a posted message.
WECOM = {
    "token": "QDG6eK",
    "key": "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C",
    "corp": "wx5823bf96d3bd56c7",
}
VERIFY = {
    "msg_signature": "5c45ff5e21c57e6ad56bac8758b79b1d9ac89fd3",
    "timestamp": "1409659589",
    "nonce": "263014780",
    "echostr": (
        "P9nAzCzyDtyTWESHep1vC5X9xho/qYX3Zpb4yKa9SKld1DsH3Iyt3tP3zNdtp+4RPcs8TgAE7OaBO+FZXvnaqQ=="
    ),
}
POSTED = {
    "msg_signature": "477715d11cdb4164915debcba66cb864d751f3e6",
    "timestamp": "1409659813",
    "nonce": "1372623149",
    "encrypt": (
        "RypEvHKD8QQKFhvQ6QleEB4J58tiPdvo+rtK1I9qca6aM/wvqnLSV5zEPeusUiX5L5X/0lWfrf0QADHHhGd3Qcz"
        "cdCUpj911L3vg3W/sYYvuJTs3TUUkSUXxaccAS0qhxchrRYt66wiSpGLYL42aM6A8dTT+6k4aSknmPj48kzJs8"
        "qLjvd4Xgpue06DOdnLxAUHzM6+kDZ+HMZfJYuR+LtwGc2hgf5gsijff0ekUNXZiqATP7PF5mZxZ3Izoun1s4z"
        "G4LUMnvw2r+KqCKIw+3IQH03v+BCA9nMELNqbSf6tiWSrXJB3LAVGUcallcrw8V2t9EL4EhzJWrQUax5wLVMN"
        "S0+rUPA3k22Ncx4XXZS9o0MBH27Bo6BpNelZpS+/uh9KsNlY6bHCmJU9p8g7m3fVKn28H3KDYA5Pl/T8Z1ptD"
        "AVe0lXdQ2YoyyH2uyPIGHBZZIs2pDBS8R07+qN+E7Q=="
    ),
}
# The Official Accounts' Java sample's test (WXBizMsgCryptTest): a known random prefix.
MP = {
    "token": "pamtest",
    "key": "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
    "appid": "wxb11529c136998cb6",
    "random": b"aaaabbbbccccdddd",
    "plain": "我是中文abcd123",
    "encrypt": (
        "jn1L23DB+6ELqJ+6bruv21Y6MD7KeIfP82D6gU39rmkgczbWwt5+3bnyg5K55bgVtVzd832WzZGMhkP72vVOfg=="
    ),
}


def test_the_wecom_docs_url_check() -> None:
    crypt = WxCrypt(WECOM["token"], WECOM["key"], WECOM["corp"])
    echo = crypt.open(
        VERIFY["msg_signature"], VERIFY["timestamp"], VERIFY["nonce"], VERIFY["echostr"]
    )
    assert echo == "1616140317555161061"


def test_the_wecom_docs_posted_message() -> None:
    crypt = WxCrypt(WECOM["token"], WECOM["key"], WECOM["corp"])
    xml = crypt.open(
        POSTED["msg_signature"], POSTED["timestamp"], POSTED["nonce"], POSTED["encrypt"]
    )
    fields = read_xml(xml)
    assert fields["Content"] == "hello" and fields["MsgId"] == "4561255354251345929"
    assert fields["FromUserName"] == "mycreate" and fields["AgentID"] == "218"


def test_the_official_account_sample_encrypts_to_the_published_text() -> None:
    crypt = WxCrypt(MP["token"], MP["key"], MP["appid"])  # type: ignore[arg-type]
    assert crypt.encrypt(MP["plain"], MP["random"]) == MP["encrypt"]  # type: ignore[arg-type]
    assert crypt.decrypt(MP["encrypt"]) == MP["plain"]


def test_a_bad_signature_another_receiver_and_a_broken_body_are_refused() -> None:
    crypt = WxCrypt(WECOM["token"], WECOM["key"], WECOM["corp"])
    args = (VERIFY["timestamp"], VERIFY["nonce"], VERIFY["echostr"])
    with pytest.raises(CryptError, match="bad signature"):
        crypt.open("5c45ff5e21c57e6ad56bac8758b79b1d9ac89fd4", *args)
    with pytest.raises(CryptError, match="bad signature"):
        WxCrypt("other", WECOM["key"], WECOM["corp"]).open(VERIFY["msg_signature"], *args)
    other = WxCrypt(WECOM["token"], WECOM["key"], "ww_another_corp")
    with pytest.raises(CryptError, match="another receiver"):
        other.open(VERIFY["msg_signature"], *args)
    with pytest.raises(CryptError) as bad:
        crypt.decrypt("not base64 at all!")
    assert bad.value.status == 400
    wrong_key = WxCrypt(WECOM["token"], new_aes_key(), WECOM["corp"])
    with pytest.raises(CryptError):
        wrong_key.decrypt(VERIFY["echostr"])


def test_round_trip_with_the_platform_side_and_in_both_directions() -> None:
    key = new_aes_key()
    ours = WxCrypt("tok", key, "ww123")
    theirs = PlatformCrypt("tok", key, "ww123")
    text = "<xml><Content><![CDATA[中文 and ]]]]><![CDATA[> text]]></Content></xml>" * 20
    assert ours.decrypt(theirs.encrypt(text)) == text
    assert theirs.decrypt(ours.encrypt(text)) == (text, "ww123")
    assert ours.sign("1", "2", "x") == theirs.sign("1", "2", "x")
    sealed = read_xml(ours.seal_xml("<xml><a>1</a></xml>", "nonce1", "1700000000"))
    assert sealed["MsgSignature"] == theirs.sign("1700000000", "nonce1", sealed["Encrypt"])
    assert theirs.decrypt(sealed["Encrypt"])[0] == "<xml><a>1</a></xml>"


@pytest.mark.parametrize(
    "key", ["short", "a" * 44, "!" * 43, "abcdefghijklmnopqrstuvwxyz0123456789ABCDE"]
)
def test_a_malformed_encoding_aes_key_says_the_shape(key: str) -> None:
    with pytest.raises(ValueError):
        aes_key(key)


def test_xml_with_a_doctype_or_not_xml_is_refused() -> None:
    bomb = b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><xml><A>&a;</A></xml>'
    for body in (bomb, b"not xml", b"<xml>" + b"a" * (1 << 20) + b"</xml>"):
        with pytest.raises(CryptError) as refused:
            read_xml(body)
        assert refused.value.status == 400
    assert read_xml("<xml><A>1</A><B><C>2</C></B></xml>") == {"A": "1", "B.C": "2"}


def test_a_stored_file_decrypts_and_a_foreign_one_does_not() -> None:
    key, other = WECOM["key"], str(MP["key"])  # fixed: a wrong key's padding is checked
    data = bytes(range(256)) * 3
    stored = PlatformCrypt("t", key, "").encrypt_file(data)
    assert WxCrypt("t", key, "").decrypt_file(stored) == data
    for bad in (b"", b"short", PlatformCrypt("t", other, "").encrypt_file(data)):
        with pytest.raises(CryptError):
            WxCrypt("t", key, "").decrypt_file(bad)
