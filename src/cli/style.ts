/** Colour in a terminal, plain text when piped (or with NO_COLOR). */
export function style(out: NodeJS.WritableStream) {
  const on = (out as { isTTY?: boolean }).isTTY === true && process.env.NO_COLOR === undefined;
  const wrap = (code: string) => (text: string) =>
    on && text !== '' ? `\x1b[${code}m${text}\x1b[0m` : text;
  const red = wrap('31');
  const green = wrap('32');
  const yellow = wrap('33');
  return {
    bold: wrap('1'),
    dim: wrap('2'),
    red,
    state: (state: string) =>
      /Uncertain/.test(state)
        ? red(state)
        : /ing$/.test(state)
          ? yellow(state)
          : /mounted|attached/.test(state) && !/un/.test(state)
            ? green(state)
            : state,
  };
}
