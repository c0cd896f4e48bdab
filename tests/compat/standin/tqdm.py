"""tqdm stand-in: the progress bar as an iterable wrapper that draws nothing (tqdm is not installed here, and its bar
on stderr is nothing to judge). tqdm(iterable, ...) yields the iterable's items; set_postfix, set_description,
update, refresh and close accept their arguments; len() is the iterable's or `total`; trange is tqdm(range(...))."""


class tqdm:
    def __init__(self, iterable=None, desc=None, total=None, leave=True, *args, **kwargs):
        self.iterable, self.desc, self.n = iterable, desc, 0
        self.total = total if total is not None or iterable is None or not hasattr(iterable, "__len__") \
            else len(iterable)

    def __iter__(self):
        for item in self.iterable:
            self.n += 1
            yield item

    def __len__(self):
        return self.total if self.total is not None else len(self.iterable)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        self.n += n

    def set_postfix(self, ordered_dict=None, refresh=True, **kwargs):
        pass

    def set_postfix_str(self, s="", refresh=True):
        pass

    def set_description(self, desc=None, refresh=True):
        self.desc = desc

    def refresh(self):
        pass

    def close(self):
        pass

    @staticmethod
    def write(s, file=None, end="\n"):
        print(s, end=end, file=file)


def trange(*args, **kwargs):
    return tqdm(range(*args), **kwargs)
