#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A small NBD server that misbehaves on request, for the ublk tests.

It serves a memory disk of SIZE bytes on a UNIX socket with the fixed
newstyle handshake (NBD_OPT_GO, NBD_OPT_INFO, NBD_OPT_EXPORT_NAME) and
simple replies, one thread per connection, all sharing the disk; it offers
FLUSH and FUA (and multi-conn only when asked). Each option below breaks
one rule the way a real server or network can:

  --error OFF:ERR     a request touching byte OFF is answered with the NBD
                      error ERR (a u32, any value), and no data
  --dup-reply OFF     a WRITE touching byte OFF is answered twice: the
                      copy goes out just before the reply to the next
                      request of that connection (a stale reply)
  --silent            accept connections, then say nothing at all
  --no-accept         never accept: the listen backlog is kept full, so a
                      client's connect() blocks
  --no-go             refuse NBD_OPT_GO and NBD_OPT_INFO (NBD_REP_ERR_UNSUP),
                      as old servers do; NBD_OPT_EXPORT_NAME still works
  --delay-handshake S wait S seconds before the greeting
  --multi-conn        advertise NBD_FLAG_CAN_MULTI_CONN
  --delay-flush S     answer a FLUSH only S seconds after it arrived (a
                      disk cache slow to write back): the client must
                      wait that long before it completes the flush
  --hold PATH         while the file PATH exists, every request that
                      arrives is held: never answered (a WRITE's data is
                      not stored), one line appended to PATH for each, so
                      its line count is how many are held. Requests that
                      arrive once PATH is gone are served; held ones stay
                      unanswered until their connection closes (a server
                      stuck on its storage, with every request in hand)

usage: fake-nbd.py SOCKET SIZE [options]; runs until killed. Written for
these tests from the protocol document (nbd's doc/proto.md).
"""
import argparse
import os
import socket
import struct
import sys
import threading
import time

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REPMAGIC = 0x0003E889045565A9
REQ_MAGIC = 0x25609513
REPLY_MAGIC = 0x67446698

FLAG_FIXED_NEWSTYLE = 1 << 0
FLAG_NO_ZEROES = 1 << 1
OPT_EXPORT_NAME, OPT_ABORT, OPT_INFO, OPT_GO = 1, 2, 6, 7
REP_ACK, REP_INFO = 1, 3
REP_ERR_UNSUP = (1 << 31) + 1
INFO_EXPORT = 0

TF_HAS_FLAGS, TF_SEND_FLUSH, TF_SEND_FUA, TF_CAN_MULTI_CONN = 1, 4, 8, 256
CMD_READ, CMD_WRITE, CMD_DISC, CMD_FLUSH = 0, 1, 2, 3
EINVAL = 22


def recv_exact(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


class Server:
    def __init__(self, args):
        self.args = args
        self.disk = bytearray(args.size)
        self.lock = threading.Lock()
        self.errors = []
        for e in args.error:
            off, err = e.split(":")
            self.errors.append((int(off, 0), int(err, 0)))
        self.tflags = TF_HAS_FLAGS | TF_SEND_FLUSH | TF_SEND_FUA
        if args.multi_conn:
            self.tflags |= TF_CAN_MULTI_CONN

    def log(self, msg):
        print(f"fake-nbd: {msg}", file=sys.stderr, flush=True)

    def opt_reply(self, conn, opt, rtype, data=b""):
        conn.sendall(struct.pack(">QIII", REPMAGIC, opt, rtype, len(data)) + data)

    def handshake(self, conn):
        """True once in transmission."""
        conn.sendall(struct.pack(">QQH", NBDMAGIC, IHAVEOPT,
                                 FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES))
        (cflags,) = struct.unpack(">I", recv_exact(conn, 4))
        while True:
            magic, opt, length = struct.unpack(">QII", recv_exact(conn, 16))
            data = recv_exact(conn, length)
            if magic != IHAVEOPT:
                return False
            if opt == OPT_EXPORT_NAME:
                self.log(f"EXPORT_NAME '{data.decode(errors='replace')}'")
                reply = struct.pack(">QH", self.args.size, self.tflags)
                if not cflags & FLAG_NO_ZEROES:
                    reply += bytes(124)
                conn.sendall(reply)
                return True
            if opt in (OPT_GO, OPT_INFO):
                if self.args.no_go:
                    self.log("refusing NBD_OPT_GO")
                    self.opt_reply(conn, opt, REP_ERR_UNSUP)
                    continue
                self.opt_reply(conn, opt, REP_INFO,
                               struct.pack(">HQH", INFO_EXPORT, self.args.size,
                                           self.tflags))
                self.opt_reply(conn, opt, REP_ACK)
                if opt == OPT_GO:
                    return True
                continue
            if opt == OPT_ABORT:
                self.opt_reply(conn, opt, REP_ACK)
                return False
            self.opt_reply(conn, opt, REP_ERR_UNSUP)

    def error_for(self, off, length):
        for eoff, err in self.errors:
            if off <= eoff < off + max(length, 1):
                return err
        return 0

    def held(self, cmd, off, length):
        """True when --hold's file exists: the request is then recorded
        in it and never answered. Appending without O_CREAT checks and
        records in one step, so a request that arrives as the file is
        removed is either held and counted, or served."""
        if self.args.hold is None:
            return False
        try:
            fd = os.open(self.args.hold, os.O_WRONLY | os.O_APPEND)
        except FileNotFoundError:
            return False
        try:
            os.write(fd, f"cmd {cmd} at {off} length {length}\n".encode())
        finally:
            os.close(fd)
        self.log(f"holding cmd {cmd} at {off}")
        return True

    def transmission(self, conn):
        stale = None
        while True:
            magic, flags, cmd, handle, off, length = struct.unpack(
                ">IHHQQI", recv_exact(conn, 28))
            if magic != REQ_MAGIC:
                self.log("bad request magic")
                return
            data = recv_exact(conn, length) if cmd == CMD_WRITE else b""
            if stale is not None:
                self.log(f"sending a stale reply, handle 0x{stale:x}")
                conn.sendall(struct.pack(">IIQ", REPLY_MAGIC, 0, stale))
                stale = None
            if cmd == CMD_DISC:
                return
            if self.held(cmd, off, length):
                continue
            err = self.error_for(off, length)
            if not err and cmd in (CMD_READ, CMD_WRITE) and off + length > self.args.size:
                err = EINVAL
            payload = b""
            if err:
                self.log(f"cmd {cmd} at {off}: error {err}")
            elif cmd == CMD_READ:
                with self.lock:
                    payload = bytes(self.disk[off:off + length])
            elif cmd == CMD_WRITE:
                with self.lock:
                    self.disk[off:off + length] = data
                if self.args.dup_reply is not None and \
                        off <= self.args.dup_reply < off + length:
                    stale = handle
            elif cmd == CMD_FLUSH:
                if self.args.delay_flush:
                    self.log(f"delaying a FLUSH reply by {self.args.delay_flush} s")
                    time.sleep(self.args.delay_flush)
            else:
                err = EINVAL
            conn.sendall(struct.pack(">IIQ", REPLY_MAGIC, err, handle) + payload)

    def serve(self, conn):
        try:
            if self.args.silent:
                while conn.recv(4096):
                    pass
                return
            if self.args.delay_handshake:
                time.sleep(self.args.delay_handshake)
            if self.handshake(conn):
                self.transmission(conn)
        except (EOFError, ConnectionError):
            pass
        finally:
            conn.close()

    def run(self):
        path = self.args.socket
        if os.path.exists(path):
            os.unlink(path)
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        tmp = path + ".tmp"
        if os.path.exists(tmp):
            os.unlink(tmp)
        lsock.bind(tmp)
        if self.args.no_accept:
            # A backlog of 0 holds one pending connection; ours fills it.
            lsock.listen(0)
            filler = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            filler.connect(tmp)
            os.rename(tmp, path)
            while True:
                time.sleep(3600)
        lsock.listen(16)
        # The socket appears under its name only once it accepts.
        os.rename(tmp, path)
        while True:
            conn, _ = lsock.accept()
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()


def main():
    p = argparse.ArgumentParser(description="a misbehaving NBD server")
    p.add_argument("socket")
    p.add_argument("size", type=lambda s: int(s, 0))
    p.add_argument("--error", action="append", default=[])
    p.add_argument("--dup-reply", type=lambda s: int(s, 0))
    p.add_argument("--silent", action="store_true")
    p.add_argument("--no-accept", action="store_true")
    p.add_argument("--no-go", action="store_true")
    p.add_argument("--delay-handshake", type=float, default=0)
    p.add_argument("--multi-conn", action="store_true")
    p.add_argument("--delay-flush", type=float, default=0)
    p.add_argument("--hold")
    Server(p.parse_args()).run()


if __name__ == "__main__":
    main()
