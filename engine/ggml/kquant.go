package ggml

import "math"

// Reference K-quant weight quantizers (quantize_row_q{4,5,6}_K_ref in
// ggml-quants.c, no importance matrix). Float operations are kept unfused in
// source order; a C build that contracts them into FMAs may differ in rare
// last-bit cases.

func init() {
	refQuantizers[Q4_K] = perBlock(256, 144, func(x []float32, y []byte) { quantizeQ45K(x, y, false) })
	refQuantizers[Q5_K] = perBlock(256, 176, func(x []float32, y []byte) { quantizeQ45K(x, y, true) })
	refQuantizers[Q6_K] = perBlock(256, 210, quantizeQ6_K)
}

func fabsf(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

func clampInt(v, lo, hi int) int { return max(lo, min(hi, v)) }

// makeQKX2Quants fits x ≈ scale*L - min (L in 0..nmax, min >= 0) minimising
// the weighted error over a grid of nstep+1 inverse scales (make_qkx2_quants).
func makeQKX2Quants(nmax int, x, weights []float32, L []uint8, rmin, rdelta float32, nstep int) (scale, theMin float32) {
	n := len(x)
	var laux [32]uint8
	lo, hi := x[0], x[0]
	sumW := weights[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		if x[i] < lo {
			lo = x[i]
		}
		if x[i] > hi {
			hi = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		clear(L[:n])
		return 0, -lo
	}
	fn := float32(nmax)
	iscale := fn / (hi - lo)
	scale = 1 / iscale
	var bestErr float32
	for i := 0; i < n; i++ {
		l := clampInt(nearestInt(float32(iscale*(x[i]-lo))), 0, nmax)
		L[i] = uint8(l)
		diff := float32(float32(scale*float32(l))+lo) - x[i]
		bestErr += float32(weights[i] * float32(diff*diff))
	}
	if nstep < 1 {
		return scale, -lo
	}
	for is := 0; is <= nstep; is++ {
		iscale = (float32(rmin+float32(rdelta*float32(is))) + fn) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i := 0; i < n; i++ {
			l := clampInt(nearestInt(float32(iscale*(x[i]-lo))), 0, nmax)
			laux[i] = uint8(l)
			w, fl := weights[i], float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(float32(w*fl) * fl)
			sumXL += float32(float32(w*fl) * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var curErr float32
			for i := 0; i < n; i++ {
				diff := float32(float32(thisScale*float32(laux[i]))+thisMin) - x[i]
				curErr += float32(weights[i] * float32(diff*diff))
			}
			if curErr < bestErr {
				copy(L[:n], laux[:n])
				bestErr, scale, lo = curErr, thisScale, thisMin
			}
		}
	}
	return scale, -lo
}

// quantizeQ45K is quantize_row_q4_K_ref / quantize_row_q5_K_ref for one block.
func quantizeQ45K(x []float32, y []byte, fiveBit bool) {
	nmax, rmin, rdelta, nstep := 15, float32(-1), float32(0.1), 20
	if fiveBit {
		nmax, rmin, nstep = 31, -0.5, 15
	}
	var L [256]uint8
	var weights [32]float32
	var scales, mins [8]float32
	var maxScale, maxMin float32
	for j := 0; j < 8; j++ {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := float32(math.Sqrt(float64(sumX2 / 32)))
		for l, v := range xs {
			weights[l] = avX + fabsf(v)
		}
		scales[j], mins[j] = makeQKX2Quants(nmax, xs, weights[:], L[32*j:32*j+32], rmin, rdelta, nstep)
		maxScale = max(maxScale, scales[j])
		maxMin = max(maxMin, mins[j])
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	sc := y[4:16]
	clear(sc)
	for j := 0; j < 8; j++ {
		ls := min(63, uint8(nearestInt(float32(invScale*scales[j]))))
		lm := min(63, uint8(nearestInt(float32(invMin*mins[j]))))
		if j < 4 {
			sc[j], sc[j+4] = ls, lm
		} else {
			sc[j+4] = ls&0xF | (lm&0xF)<<4
			sc[j-4] |= (ls >> 4) << 6
			sc[j] |= (lm >> 4) << 6
		}
	}
	putF16(y[0:], maxScale/63)
	putF16(y[2:], maxMin/63)
	dAll, dminAll := f16At(y, 0), f16At(y, 2)
	for j := 0; j < 8; j++ {
		s, m := scaleMinK4(j, sc)
		d := float32(dAll * float32(s))
		if d == 0 {
			continue // keep the first fit's quants, as ggml does
		}
		dm := float32(dminAll * float32(m))
		for ii := 0; ii < 32; ii++ {
			L[32*j+ii] = uint8(clampInt(nearestInt((x[32*j+ii]+dm)/d), 0, nmax))
		}
	}
	if !fiveBit {
		q := y[16:144]
		for c := 0; c < 4; c++ {
			for l := 0; l < 32; l++ {
				q[32*c+l] = L[64*c+l] | L[64*c+l+32]<<4
			}
		}
		return
	}
	qh, ql := y[16:48], y[48:176]
	clear(qh)
	m1, m2 := uint8(1), uint8(2)
	for c := 0; c < 4; c++ {
		for j := 0; j < 32; j++ {
			l1, l2 := L[64*c+j], L[64*c+j+32]
			if l1 > 15 {
				l1 -= 16
				qh[j] |= m1
			}
			if l2 > 15 {
				l2 -= 16
				qh[j] |= m2
			}
			ql[32*c+j] = l1 | l2<<4
		}
		m1 <<= 2
		m2 <<= 2
	}
}

const groupMaxEps = 1e-15

// makeQXQuants is make_qx_quants with rmse_type 1 and no importance weights:
// symmetric quants L in 0..2*nmax-1 (stored offset by nmax), refined over 18
// alternative scales by weighted least squares with weights x².
func makeQXQuants(nmax int, x []float32, L []int8) float32 {
	var maxV, amax float32
	for _, v := range x {
		if a := fabsf(v); a > amax {
			amax, maxV = a, v
		}
	}
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	fn := float32(nmax)
	fit := func(iscale float32, store bool) (sumLX, sumL2 float32) {
		for i, v := range x {
			l := clampInt(nearestInt(float32(iscale*v)), -nmax, nmax-1)
			if store {
				L[i] = int8(l + nmax)
			}
			w, fl := float32(v*v), float32(l)
			sumLX += float32(float32(w*v) * fl)
			sumL2 += float32(float32(w*fl) * fl)
		}
		return sumLX, sumL2
	}
	sumLX, sumL2 := fit(-fn/maxV, true)
	var scale float32
	if sumL2 != 0 {
		scale = sumLX / sumL2
	}
	best := float32(scale * sumLX)
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale := -(fn + float32(0.1*float32(is))) / maxV
		sumLX, sumL2 = fit(iscale, false)
		if sumL2 > 0 && float32(sumLX*sumLX) > float32(best*sumL2) {
			fit(iscale, true)
			scale = sumLX / sumL2
			best = float32(scale * sumLX)
		}
	}
	return scale
}

// quantizeQ6_K is quantize_row_q6_K_ref for one block.
func quantizeQ6_K(x []float32, y []byte) {
	var L [256]int8
	var scales [16]float32
	var maxScale, maxAbsScale float32
	for ib := 0; ib < 16; ib++ {
		s := makeQXQuants(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
		scales[ib] = s
		if a := fabsf(s); a > maxAbsScale {
			maxAbsScale, maxScale = a, s
		}
	}
	clear(y[:210])
	if maxAbsScale < groupMaxEps {
		return
	}
	iscale := -128 / maxScale
	putF16(y[208:], 1/iscale)
	sc := y[192:208]
	for ib := range scales {
		sc[ib] = byte(int8(min(127, nearestInt(float32(iscale*scales[ib])))))
	}
	dAll := f16At(y, 208)
	for j := 0; j < 16; j++ {
		d := float32(dAll * float32(int8(sc[j])))
		if d == 0 {
			continue
		}
		for ii := 0; ii < 16; ii++ {
			L[16*j+ii] = int8(clampInt(nearestInt(x[16*j+ii]/d), -32, 31) + 32)
		}
	}
	for h := 0; h < 2; h++ {
		ql, qh := y[64*h:64*h+64], y[128+32*h:128+32*h+32]
		Lh := L[128*h : 128*h+128]
		for l := 0; l < 32; l++ {
			q1, q2, q3, q4 := uint8(Lh[l]), uint8(Lh[l+32]), uint8(Lh[l+64]), uint8(Lh[l+96])
			ql[l] = q1&0xF | (q3&0xF)<<4
			ql[l+32] = q2&0xF | (q4&0xF)<<4
			qh[l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
		}
	}
}
