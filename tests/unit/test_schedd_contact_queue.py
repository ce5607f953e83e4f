"""The startd contact queue keeps a match's slot name and startd address, not its ad's
text, when the negotiator sent them (a cycle's 46,000 matches waiting their turn kept
80 MB of texts); without them it reads them from the text as before."""
from collections import deque
from types import SimpleNamespace

import classad2

from daemons.schedd.claims import ClaimsMixin

TEXT = '[ Name = "slot1@h"; StartdIpAddr = "<10.0.0.1:9618?addrs=10.0.0.1-9618>"; Cpus = 1 ]'


class Contacts(ClaimsMixin):
    def __init__(self) -> None:
        self.cfg = SimpleNamespace(max_pending_startd_contacts=2)
        self._contact_queue: deque = deque()
        self._contact_workers = 0

    def spawn(self, coro, name):
        coro.close()   # the workers are not run here: the queue's items are what is looked at


def test_a_match_with_name_and_address_waits_without_its_text():
    q = Contacts()
    job = SimpleNamespace(id="1.0", reserved=True)
    q._contact(job, "cid1", TEXT, "alice@d", where=("slot1@h", "<10.0.0.1:9618?addrs=10.0.0.1-9618>"))
    q._contact(job, "cid2", TEXT.replace("slot1", "slot2"), "alice@d",
               where=("slot2@h", "<10.0.0.1:9618?addrs=10.0.0.1-9618>"))
    q._contact(job, "cid3", TEXT, "alice@d")                       # a negotiator that did not send them
    a, b, c = q._contact_queue
    assert (a[2], a[7]) == ("", ("slot1@h", "10.0.0.1:9618"))
    assert a[7][1] is b[7][1]                                     # one address string for the startd's slots
    assert (c[2], c[7]) == (TEXT, ("", ""))
    # The text, when kept, gives what the negotiator would have sent.
    assert q._where(job, TEXT, None) == a[7]


def test_a_match_of_a_leftover_keeps_its_parsed_ad_and_reads_it():
    q = Contacts()
    job = SimpleNamespace(id="1.0", reserved=True)
    ad = classad2.ClassAd('[ Name = "slot1@h"; MyAddress = "<10.0.0.2:9618>" ]')
    q._contact(job, "cid", "", "alice@d", slot_ad=ad, where=("ignored@h", "<10.0.0.9:1>"))
    (item,) = q._contact_queue
    assert item[6] is ad and item[7] == ("", "")
    assert q._where(job, "", ad) == ("slot1@h", "10.0.0.2:9618")


def test_a_bad_slot_ad_frees_its_job():
    q = Contacts()
    q.log = SimpleNamespace(warning=lambda *a: None)
    job = SimpleNamespace(id="1.0", reserved=True)
    assert q._where(job, "[ Name = ", None) is None and job.reserved is False
