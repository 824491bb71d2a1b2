"""The channel contract (tests/channels/contract.py) against the e-mail channel and real mail
servers (Dovecot's IMAP, an SMTP server delivering through dovecot-lda) started by the tests
(email_driver.py). E-mail's own cases: test_email.py."""

from __future__ import annotations

import pytest

from tests.channels.contract import ChannelContract
from tests.channels.email.email_driver import EmailDriver

pytestmark = pytest.mark.services


class TestEmailContract(ChannelContract):
    @pytest.fixture
    async def driver(self, mail: EmailDriver) -> EmailDriver:
        return mail
