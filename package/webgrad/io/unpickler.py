"""A pickle reader for files that come from anywhere: the PyTorch checkpoints and the pickled CIFAR batches.

Python's own Unpickler (pickle.load) runs whatever a file names, and even with its find_class restricted it
is not safe with a hostile file: a 200 KB pickle of tuples nested in tuples, used as a dict key, overflows
the C stack when the key is hashed and kills the process; a memo index of 2**31 makes it allocate gigabytes.
This one is a small pickle machine in Python (as torch's weights-only unpickler is):

- it builds only plain values (None, bools, ints, floats, str, bytes, tuples, lists, dicts, sets) and what
  its caller's `find_class` hands out for a (module, name), called only through REDUCE or BUILD, whose
  arguments the caller checks;
- tuples nest at most MAX_DEPTH levels (a deeper one is refused as it is made, before anything hashes it);
  the memo is a dict of at most MAX_MEMO entries, so an index costs what it holds, not its value; dict keys
  and set items must be hashable; strings and numbers cannot claim more bytes than the file holds;
- every problem of the file raises UnpicklingError, naming the opcode and its offset.

UnpicklingError is both a pickle.UnpicklingError (what torch.load raises for a checkpoint it refuses) and a
ValueError (what webgrad's other readers raise for a bad file), so either `except` catches it.
"""

import pickle
import struct

MAX_DEPTH = 100  # tuples in tuples; a checkpoint needs 3 or 4 (a torch.Size in the args of a rebuild call)
MAX_MEMO = 1_000_000  # memo entries; a checkpoint has a few per tensor, a pickled CIFAR batch one per file name


class UnpicklingError(pickle.UnpicklingError, ValueError):
    """A file that cannot be read: the message says what is wrong with it."""


class Refused:
    """What find_class may return for a name a file may mention but never call (numpy.ndarray, a storage
    type): REDUCE refuses to call it."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


def short(value, limit=60):
    """A short description of a value from a hostile file (never a huge repr or a huge integer's digits)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    if isinstance(value, (list, tuple, dict, set, frozenset)):
        return f"a {type(value).__name__} of {len(value)}"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr fails
        text = f"a {type(value).__name__}"
    return text if len(text) <= limit else text[:limit] + "..."


# opcode byte -> name (pickle protocols 0-5, the binary opcodes this machine reads)
OPCODES = {
    0x80: "PROTO", 0x95: "FRAME", 0x2E: "STOP", 0x28: "MARK", 0x30: "POP", 0x31: "POP_MARK", 0x32: "DUP",
    0x4E: "NONE", 0x88: "NEWTRUE", 0x89: "NEWFALSE", 0x4A: "BININT", 0x4B: "BININT1", 0x4D: "BININT2",
    0x8A: "LONG1", 0x8B: "LONG4", 0x47: "BINFLOAT", 0x58: "BINUNICODE", 0x8C: "SHORT_BINUNICODE",
    0x8D: "BINUNICODE8", 0x55: "SHORT_BINSTRING", 0x54: "BINSTRING", 0x43: "SHORT_BINBYTES", 0x42: "BINBYTES",
    0x8E: "BINBYTES8", 0x96: "BYTEARRAY8", 0x29: "EMPTY_TUPLE", 0x74: "TUPLE", 0x85: "TUPLE1", 0x86: "TUPLE2",
    0x87: "TUPLE3",
    0x5D: "EMPTY_LIST", 0x61: "APPEND", 0x65: "APPENDS", 0x6C: "LIST", 0x7D: "EMPTY_DICT", 0x73: "SETITEM",
    0x75: "SETITEMS", 0x64: "DICT", 0x8F: "EMPTY_SET", 0x90: "ADDITEMS", 0x91: "FROZENSET", 0x71: "BINPUT",
    0x72: "LONG_BINPUT", 0x94: "MEMOIZE", 0x68: "BINGET", 0x6A: "LONG_BINGET", 0x63: "GLOBAL",
    0x93: "STACK_GLOBAL", 0x52: "REDUCE", 0x62: "BUILD", 0x51: "BINPERSID", 0x81: "NEWOBJ",
}
# what torch's weights-only unpickler reads (torch.save writes protocol 2): a checkpoint with other
# opcodes is refused by torch.load(weights_only=True), and by webgrad as well
TORCH_OPCODES = frozenset({
    "PROTO", "STOP", "MARK", "NONE", "NEWTRUE", "NEWFALSE", "BININT", "BININT1", "BININT2", "LONG1", "BINFLOAT",
    "BINUNICODE", "SHORT_BINSTRING", "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "EMPTY_LIST", "APPEND",
    "APPENDS", "EMPTY_DICT", "SETITEM", "SETITEMS", "EMPTY_SET", "BINPUT", "LONG_BINPUT", "BINGET", "LONG_BINGET",
    "GLOBAL", "REDUCE", "BUILD", "BINPERSID"})
# and with classes the user allowlisted (torch.serialization.add_safe_globals): pickled objects, NEWOBJ + BUILD
TORCH_OBJECT_OPCODES = TORCH_OPCODES | {"NEWOBJ"}


class Unpickler:
    """load() -> the object pickled in `data` (bytes).

    find_class(module, name): the object a GLOBAL stands for (raise UnpicklingError to refuse the name);
    persistent_load(pid): the object of a persistent id (None: refused); build(obj, state): BUILD's effect
    on obj (None: refused); encoding: how Python 2 strings (SHORT_BINSTRING, BINSTRING) are decoded, or
    "bytes"; opcodes: the opcode names allowed (default: all of OPCODES); what: the file, for messages.
    Functions that find_class hands out are called by REDUCE (classes never are: hand out a function that
    checks its arguments); a TypeError or ValueError they raise is reported as the file's problem.
    classes: the classes the caller trusts (the user's allowlist): only these may be called by REDUCE or made
    by NEWOBJ (cls.__new__(cls, *args)); none by default."""

    def __init__(self, data, find_class, persistent_load=None, build=None, encoding="utf-8", opcodes=None,
                 what="the pickle", classes=()):
        self.data = bytes(data)
        self.find_class, self.persistent_load, self.build = find_class, persistent_load, build
        self.classes = frozenset(classes)
        self.encoding, self.what = encoding, what
        allowed = set(OPCODES.values()) if opcodes is None else set(opcodes)
        self.torch_only = opcodes == TORCH_OPCODES
        self.dispatch = {code: getattr(self, "op_" + name) for code, name in OPCODES.items() if name in allowed}
        self.depth = {}  # id(tuple) -> (tuple, nesting depth), for the tuples this machine made

    # ----------------------------------------------------------------- reading the stream
    def fail(self, message):
        raise UnpicklingError(f"{self.what}: {message} (opcode {self.name} at byte {self.at})")

    def take(self, n):
        end = self.pos + n
        if end > len(self.data):
            self.fail(f"needs {n} more bytes, the file ends {len(self.data) - self.pos} bytes later (truncated?)")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def size(self, width):
        n = int.from_bytes(self.take(width), "little")
        if n > len(self.data) - self.pos:
            self.fail(f"declares {n} bytes, more than the {len(self.data) - self.pos} left in the file")
        return n

    def line(self):
        end = self.data.find(b"\n", self.pos, self.pos + 1024)
        if end < 0:
            self.fail("a name without its end of line (or over 1,024 bytes long)")
        text = self.take(end + 1 - self.pos)[:-1]
        try:
            return text.decode("utf-8")
        except UnicodeDecodeError:
            self.fail(f"the name {short(text)} is not UTF-8")

    # ----------------------------------------------------------------- the stack
    def pop(self):
        if not self.stack:
            self.fail("pops from an empty stack (a truncated or corrupt pickle)")
        return self.stack.pop()

    def top(self):
        if not self.stack:
            self.fail("needs a value on the stack, and the stack is empty (a truncated or corrupt pickle)")
        return self.stack[-1]

    def pop_mark(self):
        if not self.marks:
            self.fail("needs a MARK, and there is none (a corrupt pickle)")
        items, self.stack = self.stack, self.marks.pop()
        return items

    def tuple_of(self, items):
        deepest = 0
        for x in items:
            if type(x) is tuple and x:
                deepest = max(deepest, self.nesting(x))
        if deepest >= MAX_DEPTH:
            self.fail(f"tuples nest more than {MAX_DEPTH} levels deep")
        t = tuple(items)
        if t:
            self.depth[id(t)] = (t, deepest + 1)
        return t

    def nesting(self, t):
        known = self.depth.get(id(t))
        if known is not None and known[0] is t:
            return known[1]
        # a tuple made by a find_class function (torch.Size): measured without recursion, up to the limit
        deepest, todo = 1, [(t, 1)]
        while todo:
            item, level = todo.pop()
            deepest = max(deepest, level)
            if level > MAX_DEPTH:
                break
            todo.extend((x, level + 1) for x in item if type(x) is tuple and x)
        return deepest

    def hashable(self, key, where):
        try:
            hash(key)
        except TypeError:
            self.fail(f"{where} is {short(key)}, which cannot be hashed")
        return key

    def target(self, kind, verb):
        obj = self.top()
        if not isinstance(obj, kind) or (kind is not dict and type(obj) is not kind):
            self.fail(f"cannot {verb} {short(obj)} (not a {kind.__name__})")
        return obj

    def fill(self, d, items):
        if len(items) % 2:
            self.fail(f"an odd number of items ({len(items)}) for a dict's keys and values")
        for i in range(0, len(items), 2):
            d[self.hashable(items[i], "a dict key")] = items[i + 1]
        return d

    # ----------------------------------------------------------------- the machine
    def load(self):
        self.pos, self.stack, self.marks, self.memo = 0, [], [], {}
        self.name, self.at = "(start)", 0
        data, dispatch = self.data, self.dispatch
        while True:
            if self.pos >= len(data):
                self.name, self.at = "(none: the end of the data)", self.pos
                self.fail("ends before its STOP opcode (truncated?)")
            self.at = self.pos
            code = data[self.pos]
            self.pos += 1
            op = dispatch.get(code)
            if op is None:
                self.name = OPCODES.get(code, f"0x{code:02x}")
                if code not in OPCODES:
                    self.fail("is not a pickle opcode (not a pickle, or a corrupt one)")
                self.fail("is not read here" + (": PyTorch's weights-only loader reads pickle protocol 2, what "
                                                "torch.save writes" if self.torch_only else ""))
            self.name = OPCODES[code]
            if code == 0x2E:  # STOP
                value = self.pop()
                if self.marks:
                    self.fail("STOP inside an unfinished MARK (a corrupt pickle)")
                return value
            op()

    def op_PROTO(self):
        proto = self.take(1)[0]
        if proto > pickle.HIGHEST_PROTOCOL:
            self.fail(f"pickle protocol {proto} is not one Python knows")

    def op_FRAME(self):
        self.take(8)

    def op_STOP(self):  # handled in load()
        pass

    def op_MARK(self):
        self.marks.append(self.stack)
        self.stack = []

    def op_POP(self):
        self.pop()

    def op_POP_MARK(self):
        self.pop_mark()

    def op_DUP(self):
        self.stack.append(self.top())

    def op_NONE(self):
        self.stack.append(None)

    def op_NEWTRUE(self):
        self.stack.append(True)

    def op_NEWFALSE(self):
        self.stack.append(False)

    def op_BININT(self):
        self.stack.append(struct.unpack("<i", self.take(4))[0])

    def op_BININT1(self):
        self.stack.append(self.take(1)[0])

    def op_BININT2(self):
        self.stack.append(struct.unpack("<H", self.take(2))[0])

    def op_LONG1(self):
        self.stack.append(int.from_bytes(self.take(self.take(1)[0]), "little", signed=True))

    def op_LONG4(self):
        self.stack.append(int.from_bytes(self.take(self.size(4)), "little", signed=True))

    def op_BINFLOAT(self):
        self.stack.append(struct.unpack(">d", self.take(8))[0])

    def unicode(self, width):
        raw = self.take(self.size(width))
        try:
            self.stack.append(raw.decode("utf-8", "surrogatepass"))
        except UnicodeDecodeError:
            self.fail(f"a string that is not UTF-8 ({short(raw)})")

    def op_SHORT_BINUNICODE(self):
        self.unicode(1)

    def op_BINUNICODE(self):
        self.unicode(4)

    def op_BINUNICODE8(self):
        self.unicode(8)

    def string(self, width):
        raw = self.take(self.size(width))
        if self.encoding == "bytes":
            return self.stack.append(raw)
        try:
            self.stack.append(raw.decode(self.encoding))
        except UnicodeDecodeError:
            self.fail(f"a Python 2 string that is not {self.encoding} ({short(raw)})")

    def op_SHORT_BINSTRING(self):
        self.string(1)

    def op_BINSTRING(self):
        self.string(4)

    def op_SHORT_BINBYTES(self):
        self.stack.append(self.take(self.size(1)))

    def op_BINBYTES(self):
        self.stack.append(self.take(self.size(4)))

    def op_BINBYTES8(self):
        self.stack.append(self.take(self.size(8)))

    def op_BYTEARRAY8(self):
        self.stack.append(bytearray(self.take(self.size(8))))

    def op_EMPTY_TUPLE(self):
        self.stack.append(())

    def op_TUPLE(self):
        value = self.tuple_of(self.pop_mark())  # popped before self.stack is read: the MARK changes it
        self.stack.append(value)

    def small_tuple(self, n):
        items = [self.pop() for _ in range(n)][::-1]
        self.stack.append(self.tuple_of(items))

    def op_TUPLE1(self):
        self.small_tuple(1)

    def op_TUPLE2(self):
        self.small_tuple(2)

    def op_TUPLE3(self):
        self.small_tuple(3)

    def op_EMPTY_LIST(self):
        self.stack.append([])

    def op_LIST(self):
        value = self.pop_mark()
        self.stack.append(value)

    def op_APPEND(self):
        item = self.pop()
        self.target(list, "append to").append(item)

    def op_APPENDS(self):
        items = self.pop_mark()
        self.target(list, "extend").extend(items)

    def op_EMPTY_DICT(self):
        self.stack.append({})

    def op_DICT(self):
        value = self.fill({}, self.pop_mark())
        self.stack.append(value)

    def op_SETITEM(self):
        value, key = self.pop(), self.pop()
        self.fill(self.target(dict, "set an item of"), [key, value])

    def op_SETITEMS(self):
        items = self.pop_mark()
        self.fill(self.target(dict, "set items of"), items)

    def op_EMPTY_SET(self):
        self.stack.append(set())

    def op_ADDITEMS(self):
        items = self.pop_mark()
        self.target(set, "add items to").update(self.hashable(x, "a set item") for x in items)

    def op_FROZENSET(self):
        items = self.pop_mark()
        self.stack.append(frozenset(self.hashable(x, "a set item") for x in items))

    def put(self, index):
        if len(self.memo) >= MAX_MEMO and index not in self.memo:
            self.fail(f"stores more than {MAX_MEMO} memo entries")
        self.memo[index] = self.top()

    def op_BINPUT(self):
        self.put(self.take(1)[0])

    def op_LONG_BINPUT(self):
        self.put(int.from_bytes(self.take(4), "little"))

    def op_MEMOIZE(self):
        self.put(len(self.memo))

    def get(self, index):
        if index not in self.memo:
            self.fail(f"memo entry {index} was never stored (a corrupt pickle)")
        self.stack.append(self.memo[index])

    def op_BINGET(self):
        self.get(self.take(1)[0])

    def op_LONG_BINGET(self):
        self.get(int.from_bytes(self.take(4), "little"))

    def call(self, fn, *args):
        """fn(*args) for a function of the caller's (find_class, a REDUCE target, build, persistent_load):
        a ValueError or TypeError it raises is the file's problem, reported with where it happened."""
        try:
            return fn(*args)
        except UnpicklingError as e:
            message = str(e)
        except (TypeError, ValueError, OverflowError) as e:
            name = getattr(fn, "__name__", "")
            message = f"{name}(): {e}" if isinstance(e, TypeError) and name and name not in str(e) else str(e)
        self.fail(message)  # outside the except: no chained traceback of our own code

    def op_GLOBAL(self):
        module = self.line()
        self.stack.append(self.call(self.find_class, module, self.line()))

    def op_STACK_GLOBAL(self):
        qualname, module = self.pop(), self.pop()
        if type(module) is not str or type(qualname) is not str:
            self.fail(f"STACK_GLOBAL needs two strings, got {short(module)} and {short(qualname)}")
        self.stack.append(self.call(self.find_class, module, qualname))

    def op_REDUCE(self):
        args = self.pop()
        func = self.pop()
        if type(args) is not tuple:
            self.fail(f"the arguments of a call must be a tuple, got {short(args)}")
        if isinstance(func, Refused) or not callable(func) or (isinstance(func, type) and func not in self.classes):
            self.fail(f"{short(func)} cannot be called from a file")
        self.stack.append(self.call(func, *args))

    def op_NEWOBJ(self):
        args = self.pop()
        cls = self.pop()
        if not isinstance(cls, type) or cls not in self.classes:
            self.fail(f"can only create new objects of classes allowlisted by the user, got {short(cls)}")
        if type(args) is not tuple:
            self.fail(f"the arguments of a new object must be a tuple, got {short(args)}")
        self.stack.append(self.call(cls.__new__, cls, *args))

    def op_BUILD(self):
        state = self.pop()
        obj = self.top()
        if self.build is None:
            self.fail(f"BUILD of {short(obj)} is not allowed here")
        self.call(self.build, obj, state)

    def op_BINPERSID(self):
        pid = self.pop()
        if self.persistent_load is None:
            self.fail("a persistent id, which this kind of file does not use")
        self.stack.append(self.call(self.persistent_load, pid))
